import { describe, expect, it } from "@effect/vitest"
import { HttpApiSchema } from "@effect/platform"
import { Schema, SchemaAST } from "effect"
import * as fs from "node:fs"
import { ErrorClasses, ErrorCodes } from "../../src/domain/Errors.js"
import { errorDocsPath, renderErrorDocs } from "../../src/tools/errorDocs.js"

const literalsOf = (ast: SchemaAST.AST): Array<string> =>
  SchemaAST.isUnion(ast)
    ? ast.types.flatMap(literalsOf)
    : SchemaAST.isLiteral(ast) && typeof ast.literal === "string"
    ? [ast.literal]
    : []

describe("error registry", () => {
  it("every code an error class can carry is registered with that class's HTTP status", () => {
    const seen = new Set<string>()
    for (const [cls, wire] of ErrorClasses) {
      const status = HttpApiSchema.getStatusError(wire)
      const codeSchema: Schema.Schema.AnyNoContext = cls.fields.code
      const codes = literalsOf(codeSchema.ast)
      expect(codes.length, cls.name).toBeGreaterThan(0)
      for (const code of codes) {
        expect(Object.entries(ErrorCodes).find(([c]) => c === code)?.[1].status, code).toBe(status)
        seen.add(code)
      }
    }
    seen.add("PAYMENT_REQUIRED")
    expect([...seen].sort()).toEqual(Object.keys(ErrorCodes).sort())
  })

  it("docs/errors.md is generated from the registry and up to date", () => {
    expect(fs.readFileSync(errorDocsPath, "utf8")).toBe(renderErrorDocs())
  })
})
