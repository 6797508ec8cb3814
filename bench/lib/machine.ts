// The machine a bench ran on (cores, CPU, memory, kernel, Node, load, code version), for the report.
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import * as os from "node:os"

// ---------------------------------------------------------------------------------------------------------------
// main

export const machineInfo = () => {
  const cpuModel = (() => {
    try {
      return /model name\s*:\s*(.+)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1]?.trim() ?? os.cpus()[0]?.model ?? "?"
    } catch {
      return os.cpus()[0]?.model ?? "?"
    }
  })()
  const sh = (cmd: string, args: ReadonlyArray<string>) => {
    try {
      return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
    } catch {
      return "?"
    }
  }
  return {
    nproc: sh("nproc", []),
    cpuModel,
    memoryGiB: os.totalmem() / 1024 ** 3,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    loadAverage: os.loadavg(),
    git: `${sh("git", ["rev-parse", "--short", "HEAD"])}${sh("git", ["status", "--porcelain"]) === "" ? "" : " (with uncommitted changes)"}`
  }
}
