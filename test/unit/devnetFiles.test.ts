import { describe, expect, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pidFileFor, stopStaleAnvil, writePidFile } from "../../layers/devnet/pidFile.js"
import { exitDumpFile, promoteExitDump, writeFileAtomic } from "../../layers/devnet/stateFile.js"

const withDir = async (body: (dir: string) => Promise<void>) => {
  const dir = await mkdtemp(join(tmpdir(), "devnet-files-"))
  try {
    await body(dir)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe("devnet state file", () => {
  it("is replaced atomically, leaving no temporary file behind", () =>
    withDir(async (dir) => {
      const file = join(dir, "anvil-state.json")
      await writeFileAtomic(file, "{\"a\":1}")
      await writeFileAtomic(file, "{\"a\":2}")
      expect(await readFile(file, "utf8")).toBe("{\"a\":2}")
      expect(await readdir(dir)).toEqual(["anvil-state.json"])
    }))

  it("takes anvil's exit dump only when it is complete", () =>
    withDir(async (dir) => {
      const state = join(dir, "anvil-state.json")
      await writeFile(state, "{\"block\":{\"number\":\"0x1\"},\"accounts\":{}}")
      // anvil killed while writing: a truncated dump is dropped, the saved state stays
      await writeFile(exitDumpFile(state), "{\"block\":{\"number\":\"0x2\"},\"acc")
      await promoteExitDump(state)
      expect(JSON.parse(await readFile(state, "utf8")).block.number).toBe("0x1")
      // a complete dump is newer than anything we saved: it becomes the state file
      await writeFile(exitDumpFile(state), "{\"block\":{\"number\":\"0x3\"},\"accounts\":{}}")
      await promoteExitDump(state)
      expect(JSON.parse(await readFile(state, "utf8")).block.number).toBe("0x3")
      expect(await readdir(dir)).toEqual(["anvil-state.json"])
    }))
})

describe("a stale anvil pid file", () => {
  it("never stops a process that is not our anvil (a reused pid)", () =>
    withDir(async (dir) => {
      const state = join(dir, "anvil-state.json")
      const other = spawn("sleep", ["30"], { stdio: "ignore" })
      try {
        const pid = other.pid
        if (pid === undefined) throw new Error("sleep did not start")
        await writePidFile(pidFileFor(state), pid)
        expect(await stopStaleAnvil(pidFileFor(state), exitDumpFile(state))).toBeUndefined()
        expect(alive(pid)).toBe(true)
        expect(await readdir(dir)).toEqual([]) // the stale record is gone
      } finally {
        other.kill("SIGKILL")
      }
    }))

  it("is removed when its process is gone, and ignored when unreadable", () =>
    withDir(async (dir) => {
      const state = join(dir, "anvil-state.json")
      await writeFile(pidFileFor(state), "{\"pid\":2147483000,\"startTime\":\"1\"}")
      expect(await stopStaleAnvil(pidFileFor(state), exitDumpFile(state))).toBeUndefined()
      await writeFile(pidFileFor(state), "garbage")
      expect(await stopStaleAnvil(pidFileFor(state), exitDumpFile(state))).toBeUndefined()
      expect(await readdir(dir)).toEqual([])
    }))
})
