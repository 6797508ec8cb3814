import { describe, expect, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { fileURLToPath } from "node:url"

const script = fileURLToPath(new URL("../../src/tools/lockOptional.mjs", import.meta.url))

describe("package-lock.json", () => {
  it("records every optional platform package a dependency pins, so that npm ci accepts it (npm/cli#9846)", () => {
    const run = spawnSync(process.execPath, [script, "--check"], { encoding: "utf8", timeout: 30_000 })
    expect(run.stdout.trim()).toBe("package-lock.json records every pinned optional package")
    expect(run.status).toBe(0)
  })
})
