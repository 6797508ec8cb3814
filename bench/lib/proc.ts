// Process accounting from /proc (Linux): resident memory (sampled peak and the kernel's high-water mark) and CPU time.
import { execFileSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"

const clockTicks = (() => {
  try {
    const n = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim())
    return Number.isFinite(n) && n > 0 ? n : 100
  } catch {
    return 100
  }
})()

const readText = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

/** VmRSS and VmHWM (peak RSS since start) in KiB, or undefined when the process is gone. */
export const memoryKb = (pid: number): { readonly rss: number; readonly hwm: number } | undefined => {
  const status = readText(`/proc/${pid}/status`)
  if (status === undefined) return undefined
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? "0")
  return { rss: field("VmRSS"), hwm: field("VmHWM") }
}

interface Stat {
  readonly ppid: number
  readonly comm: string
  /** utime + stime in ms. */
  readonly cpuMs: number
  readonly systemMs: number
}

const stat = (pid: number): Stat | undefined => {
  const text = readText(`/proc/${pid}/stat`)
  if (text === undefined) return undefined
  const close = text.lastIndexOf(")")
  const comm = text.slice(text.indexOf("(") + 1, close)
  // Fields after ") ": state(3) ppid(4) ... utime(14) stime(15)
  const rest = text.slice(close + 2).split(" ")
  const ppid = Number(rest[1])
  const utime = Number(rest[11])
  const stime = Number(rest[12])
  return { ppid, comm, cpuMs: ((utime + stime) * 1000) / clockTicks, systemMs: (stime * 1000) / clockTicks }
}

const allPids = (): Array<number> =>
  readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number)

/** Direct children of `pid`. */
export const childrenOf = (pid: number): Array<{ readonly pid: number; readonly comm: string }> =>
  allPids().flatMap((p) => {
    const s = stat(p)
    return s !== undefined && s.ppid === pid ? [{ pid: p, comm: s.comm }] : []
  })

/** `pid` and all its descendants. */
export const processTree = (pid: number): Array<number> => {
  const byParent = new Map<number, Array<number>>()
  for (const p of allPids()) {
    const s = stat(p)
    if (s === undefined) continue
    const list = byParent.get(s.ppid) ?? []
    list.push(p)
    byParent.set(s.ppid, list)
  }
  const out: Array<number> = []
  const walk = (p: number) => {
    out.push(p)
    for (const c of byParent.get(p) ?? []) walk(c)
  }
  walk(pid)
  return out
}

/** CPU time (ms) used so far by a process tree rooted at `pid` (live processes only). */
export const treeCpuMs = (pid: number): number =>
  processTree(pid).reduce((sum, p) => sum + (stat(p)?.cpuMs ?? 0), 0)

export const cpuMs = (pid: number): number => stat(pid)?.cpuMs ?? 0

/** Kernel-mode CPU time (ms) of one process (syscalls: socket writes and reads, for one). */
export const systemCpuMs = (pid: number): number => stat(pid)?.systemMs ?? 0

/** Proportional set size in KiB (shared pages split between the processes sharing them), or 0. */
export const pssKb = (pid: number): number => {
  const rollup = readText(`/proc/${pid}/smaps_rollup`)
  return rollup === undefined ? 0 : Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? "0")
}

/**
 * Memory of a process tree in KiB as the sum of PSS: summing RSS would count PostgreSQL's shared buffers once per
 * backend.
 */
export const treePssKb = (pid: number): number =>
  processTree(pid).reduce((sum, p) => sum + pssKb(p), 0)

/** Samples RSS of some processes every `intervalMs` and keeps the peak of each. */
export class RssSampler {
  private readonly peaks = new Map<string, number>()
  private readonly timer: NodeJS.Timeout

  constructor(private readonly targets: Record<string, () => number>, intervalMs = 200) {
    this.sample()
    this.timer = setInterval(() => this.sample(), intervalMs)
    this.timer.unref()
  }

  private sample() {
    for (const [name, read] of Object.entries(this.targets)) {
      const kb = read()
      if (kb > (this.peaks.get(name) ?? 0)) this.peaks.set(name, kb)
    }
  }

  /** Peak KiB per target; stops sampling. */
  stop(): Record<string, number> {
    clearInterval(this.timer)
    this.sample()
    return Object.fromEntries(this.peaks)
  }
}

/**
 * CPU (ms) of PostgreSQL: its live processes plus what its exited children used (the postmaster's cutime + cstime), so
 * that an autovacuum or parallel worker ending during a phase does not take its CPU out of the sum.
 */
export const postgresCpuMs = (postmasterPid: number): number => {
  const text = readText(`/proc/${postmasterPid}/stat`) ?? ""
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
  const reaped = ((Number(fields[13] ?? 0) + Number(fields[14] ?? 0)) * 1000) / clockTicks
  return treeCpuMs(postmasterPid) + reaped
}

/** The postmaster's pid from its data directory (0 when it is not running). */
export const postmasterPid = (dataDir: string): number =>
  Number((readText(`${dataDir}/postmaster.pid`) ?? "0").split("\n")[0])
