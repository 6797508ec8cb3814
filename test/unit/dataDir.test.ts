import { describe, expect, it } from "@effect/vitest"
import { mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DataDirError, ensureWritableDir } from "../../layers/dataDir.js"

describe("ensureWritableDir (DATA_DIR before anything starts)", () => {
  it("creates missing levels and leaves no probe file behind", async () => {
    const root = await mkdtemp(join(tmpdir(), "datadir-"))
    try {
      const target = join(root, "a", "b", "c")
      await ensureWritableDir(target, "DATA_DIR")
      expect((await stat(target)).isDirectory()).toBe(true)
      expect(await readdir(target)).toEqual([])
      await ensureWritableDir(target, "DATA_DIR") // an existing directory is fine
    } finally {
      await rm(root, { recursive: true, force: true })
    }
  })

  it.skipIf(process.platform !== "linux")("fails at once under /proc, where Node's recursive mkdir spins forever", async () => {
    const started = Date.now()
    const attempt = ensureWritableDir("/proc/nope/data", "DATA_DIR")
    await expect(attempt).rejects.toBeInstanceOf(DataDirError)
    await expect(attempt).rejects.toThrow(/^DATA_DIR \/proc\/nope\/data is not usable: cannot create \/proc\/nope /)
    expect(Date.now() - started).toBeLessThan(1_000)
  })

  it("names a file standing where a directory should be", async () => {
    const root = await mkdtemp(join(tmpdir(), "datadir-"))
    try {
      await writeFile(join(root, "file"), "")
      const attempt = ensureWritableDir(join(root, "file", "data"), "DATA_DIR")
      await expect(attempt).rejects.toBeInstanceOf(DataDirError)
      await expect(attempt).rejects.toThrow("not a directory")
    } finally {
      await rm(root, { recursive: true, force: true })
    }
  })
})
