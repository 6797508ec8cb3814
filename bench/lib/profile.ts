// Summarises a V8 .cpuprofile (node --cpu-prof) over a time window: self time by package/area, the hottest functions,
// and inclusive time of our own code and of a few library entry points.
import { readFileSync } from "node:fs"
import * as path from "node:path"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
}
interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
  readonly children?: ReadonlyArray<number>
}
interface CpuProfile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly startTime: number
  readonly endTime: number
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const isProfile = (value: unknown): value is CpuProfile =>
  typeof value === "object" && value !== null && "nodes" in value && "samples" in value && "timeDeltas" in value

export interface Share {
  readonly name: string
  readonly ms: number
  /** Share of busy (non-idle) CPU time in the window. */
  readonly pct: number
}

export interface ProfileSummary {
  readonly windowMs: number
  readonly busyMs: number
  readonly idleMs: number
  /** False when the window did not overlap the profile and the whole profile was used. */
  readonly windowed: boolean
  readonly byArea: ReadonlyArray<Share>
  readonly topSelf: ReadonlyArray<Share>
  readonly inclusiveApp: ReadonlyArray<Share>
  readonly inclusiveLibrary: ReadonlyArray<Share>
  /** For the hottest functions in node internals or V8 builtins: who calls them (nearest frame in a package or our code). */
  readonly callers: ReadonlyArray<{ readonly name: string; readonly ms: number; readonly via: ReadonlyArray<Share> }>
}

/** Library functions worth knowing the inclusive cost of on the paid-execution path. */
const LIBRARY_ENTRY_POINTS = new Set([
  "verifyTypedData",
  "recoverTypedDataAddress",
  "recoverPublicKey",
  "writeContract",
  "sendTransaction",
  "prepareTransactionRequest",
  "signTransaction",
  "sendRawTransaction",
  "waitForTransactionReceipt",
  "readContract",
  "call",
  "keccak256",
  "validate",
  "decodeUnknown",
  "encodeUnknown",
  "parse",
  "stringify",
  "handleRowDescription",
  "parseDataRowMessage",
  "createActor",
  "transition"
])

/** Where a frame's code lives: an npm package, node internals, our own directories, or V8 itself. */
const areaOf = (frame: CallFrame, root: string): string => {
  const { url, functionName } = frame
  if (url === "") {
    if (functionName === "(garbage collector)") return "V8: garbage collector"
    if (functionName === "(program)") return "V8: (program) native/unattributed"
    if (functionName === "(idle)") return "(idle)"
    return "native: V8 builtins and node bindings (writev…)"
  }
  if (url.startsWith("node:")) return "node: internals"
  const nm = url.lastIndexOf("/node_modules/")
  if (nm >= 0) {
    const parts = url.slice(nm + "/node_modules/".length).split("/")
    const pkg = parts[0]?.startsWith("@") ? `${parts[0]}/${parts[1] ?? ""}` : parts[0] ?? "?"
    return `npm: ${pkg}`
  }
  const file = url.replace(/^file:\/\//, "")
  if (file.startsWith(root)) return `app: ${path.relative(root, file).split(path.sep)[0] ?? "?"}`
  return "other"
}

const labelOf = (frame: CallFrame, root: string): string => {
  const file = frame.url.replace(/^file:\/\//, "")
  const nm = file.lastIndexOf("/node_modules/")
  const where = frame.url === ""
    ? ""
    : nm >= 0
    ? file.slice(nm + "/node_modules/".length)
    : file.startsWith(root)
    ? path.relative(root, file)
    : file
  return `${frame.functionName === "" ? "(anonymous)" : frame.functionName}${where === "" ? "" : ` ${where}:${frame.lineNumber + 1}`}`
}

const top = (map: Map<string, number>, busyMs: number, n: number): Array<Share> =>
  [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, ms]) => ({ name, ms, pct: (100 * ms) / Math.max(1, busyMs) }))

/**
 * `fromUs`/`toUs`: the window in the profile's clock (CLOCK_MONOTONIC µs on Linux, the same clock as
 * `process.hrtime.bigint()` in another process on this machine).
 */
export const summariseProfile = (file: string, root: string, fromUs: number, toUs: number): ProfileSummary => {
  const parsed: unknown = JSON.parse(readFileSync(file, "utf8"))
  if (!isProfile(parsed)) throw new Error(`${file} is not a .cpuprofile`)
  const profile = parsed
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)

  const overlaps = fromUs < profile.endTime && toUs > profile.startTime
  const from = overlaps ? fromUs : profile.startTime
  const to = overlaps ? toUs : profile.endTime

  const byArea = new Map<string, number>()
  const self = new Map<string, number>()
  const inclusive = new Map<string, number>()
  const libraryInclusive = new Map<string, number>()
  /** self label → (nearest package/app ancestor label → ms) */
  const callerMap = new Map<string, Map<string, number>>()
  let busyMs = 0
  let idleMs = 0
  let t = profile.startTime
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0
    if (t < from || t > to) continue
    const ms = (profile.timeDeltas[i + 1] ?? profile.timeDeltas[i] ?? 0) / 1000
    const node = byId.get(profile.samples[i] ?? -1)
    if (node === undefined) continue
    const area = areaOf(node.callFrame, root)
    if (area === "(idle)") {
      idleMs += ms
      continue
    }
    busyMs += ms
    byArea.set(area, (byArea.get(area) ?? 0) + ms)
    const label = labelOf(node.callFrame, root)
    self.set(label, (self.get(label) ?? 0) + ms)
    if (!area.startsWith("npm: ") && !area.startsWith("app: ")) {
      for (let id = parent.get(node.id); id !== undefined; id = parent.get(id)) {
        const frame = byId.get(id)?.callFrame
        if (frame === undefined) break
        const frameArea = areaOf(frame, root)
        if (frameArea.startsWith("npm: ") || frameArea.startsWith("app: ")) {
          const via = callerMap.get(label) ?? new Map<string, number>()
          const key = labelOf(frame, root)
          via.set(key, (via.get(key) ?? 0) + ms)
          callerMap.set(label, via)
          break
        }
      }
    }
    // inclusive: every distinct frame on the stack once
    const seen = new Set<string>()
    const seenLib = new Set<string>()
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)?.callFrame
      if (frame === undefined) break
      const frameArea = areaOf(frame, root)
      if (frameArea.startsWith("app: ")) {
        // By file: positions are those of the tsx-transformed code, so lines mean little.
        const key = path.relative(root, frame.url.replace(/^file:\/\//, ""))
        if (!seen.has(key)) {
          seen.add(key)
          inclusive.set(key, (inclusive.get(key) ?? 0) + ms)
        }
      } else if (frameArea.startsWith("npm: ") && LIBRARY_ENTRY_POINTS.has(frame.functionName)) {
        const key = `${frame.functionName} (${frameArea.slice(5)})`
        if (!seenLib.has(key)) {
          seenLib.add(key)
          libraryInclusive.set(key, (libraryInclusive.get(key) ?? 0) + ms)
        }
      }
    }
  }
  return {
    windowMs: (to - from) / 1000,
    busyMs,
    idleMs,
    windowed: overlaps,
    byArea: top(byArea, busyMs, 30),
    topSelf: top(self, busyMs, 25),
    inclusiveApp: top(inclusive, busyMs, 25),
    inclusiveLibrary: top(libraryInclusive, busyMs, 20),
    callers: top(self, busyMs, 40)
      .filter((x) => callerMap.has(x.name))
      .slice(0, 6)
      .map((x) => ({ name: x.name, ms: x.ms, via: top(callerMap.get(x.name) ?? new Map(), x.ms, 4) }))
  }
}
