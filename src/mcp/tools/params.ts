// Argument schemas shared by the MCP tools: JSON numbers and booleans with the API's limits, each described for the
// assistant that fills them in.
import { Schema } from "effect"

/** An optional argument with its description. */
export const described = <A, I>(schema: Schema.Schema<A, I>, description: string) => Schema.optional(schema.annotations({ description }))

export const between = (min: number, max: number) => Schema.Number.pipe(Schema.between(min, max))
export const int = (min: number, max: number) => Schema.Int.pipe(Schema.between(min, max))

/** An optional page size. */
export const limit = (max: number, fallback: number) => described(int(1, max), `How many, 1-${max} (default ${fallback})`)
