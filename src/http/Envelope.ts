// The success envelope `{success: true, data}` shared by every endpoint.
import { Schema } from "effect"

export const ok = <A, I, R>(data: Schema.Schema<A, I, R>) => Schema.Struct({ success: Schema.Literal(true), data })

export const respond = <A>(data: A) => ({ success: true as const, data })
