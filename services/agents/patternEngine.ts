// JSON Schema `pattern`s on RE2 (re2-wasm, linear time) for ajv, within limits that keep unpaid inputs cheap: pattern size, work per string, time per validation.
import type { RegExpEngine } from "ajv/dist/types/index.js"
import { createRequire } from "node:module"
import type { RE2 } from "re2-wasm"

const require = createRequire(import.meta.url)
const RE2_MODULES = [require.resolve("re2-wasm"), require.resolve("re2-wasm/build/wasm/re2.js")]

/** A fresh copy of re2-wasm: a new WASM instance with an empty heap. */
const loadRE2 = (): typeof RE2 => {
  for (const id of RE2_MODULES) delete require.cache[id]
  const loaded: typeof import("re2-wasm") = require("re2-wasm")
  return loaded.RE2
}

/** Longest pattern source accepted at registration. */
export const MAX_PATTERN_LENGTH = 1_000
/** Largest estimated program (see patternSize) accepted at registration. */
export const MAX_PATTERN_SIZE = 1_000
/** A string is checked against a pattern only when size × length stays within this (RE2's cost is O(size × length)). */
export const MAX_PATTERN_WORK = 50_000
/** Pattern checks of one validation (compiles included) stop after this much time; the rest fail. */
export const PATTERN_BUDGET_MS = 250
/** Compiled patterns kept between checks (least recently used dropped first). */
const CACHED_PATTERNS = 16
/** A compiled pattern is compiled afresh after checking this many characters, which bounds the growth of its DFA cache. */
const RECOMPILE_AFTER_CHARS = 4_096

/**
 * An estimate of the size of RE2's program for a JavaScript pattern: one unit per literal, class or assertion, more for
 * classes that span all of Unicode (`.`, `\D`, negated classes: 4; `\p{...}`: 16); `{n,m}` repeats its operand m times,
 * nested repeats multiply, alternatives add. RE2 runs in time proportional to this size times the input length.
 */
export const patternSize = (pattern: string): number => {
  const frames: Array<{ total: number; last: number }> = [{ total: 0, last: 0 }]
  const top = () => frames[frames.length - 1] ?? { total: 0, last: 0 }
  const atom = (weight: number) => {
    const frame = top()
    frame.total += frame.last
    frame.last = weight
  }
  let i = 0
  while (i < pattern.length) {
    const c = pattern[i]
    if (c === "\\") {
      const next = pattern[i + 1] ?? ""
      if ((next === "p" || next === "P") && pattern[i + 2] === "{") {
        const end = pattern.indexOf("}", i)
        i = end === -1 ? pattern.length : end + 1
        atom(16)
      } else if (next === "u" && pattern[i + 2] === "{") {
        const end = pattern.indexOf("}", i)
        i = end === -1 ? pattern.length : end + 1
        atom(1)
      } else {
        i += next === "u" ? 6 : next === "x" ? 4 : next === "c" ? 3 : 2
        atom(next === "D" || next === "W" || next === "S" ? 4 : 1)
      }
    } else if (c === "[") {
      let j = i + 1
      const negated = pattern[j] === "^"
      let weight = negated ? 4 : 1
      while (j < pattern.length && pattern[j] !== "]") {
        if (pattern[j] === "\\") {
          const next = pattern[j + 1] ?? ""
          if (next === "p" || next === "P") weight = 16
          else if (next === "D" || next === "W" || next === "S") weight = Math.max(weight, 4)
          j += 2
        } else j += 1
      }
      i = j + 1
      atom(weight)
    } else if (c === "(") {
      frames.push({ total: 0, last: 0 })
      i += 1
      if (pattern[i] === "?") {
        // (?:  (?=  (?!  (?<=  (?<!  (?<name>  (?P<name>
        if (pattern[i + 1] === "<" && pattern[i + 2] !== "=" && pattern[i + 2] !== "!") {
          const end = pattern.indexOf(">", i)
          i = end === -1 ? pattern.length : end + 1
        } else if (pattern[i + 1] === "P" && pattern[i + 2] === "<") {
          const end = pattern.indexOf(">", i)
          i = end === -1 ? pattern.length : end + 1
        } else i += pattern[i + 1] === "<" ? 3 : 2
      }
    } else if (c === ")") {
      const frame = frames.length > 1 ? frames.pop() : undefined
      atom(frame === undefined ? 1 : frame.total + frame.last)
      i += 1
    } else if (c === "|") {
      const frame = top()
      frame.total += frame.last + 1
      frame.last = 0
      i += 1
    } else if (c === "*" || c === "+" || c === "?") {
      top().last += 1
      i += pattern[i + 1] === "?" ? 2 : 1
    } else if (c === "{") {
      const repeat = /^\{(\d+)(?:(,)(\d*))?\}/.exec(pattern.slice(i, i + 24))
      if (repeat === null) {
        atom(1)
        i += 1
      } else {
        const min = Number(repeat[1])
        const max = repeat[2] === undefined ? min : repeat[3] === undefined || repeat[3] === "" ? min + 1 : Number(repeat[3])
        const frame = top()
        frame.last = frame.last * Math.max(1, min, max) + 1
        i += repeat[0].length
        if (pattern[i] === "?") i += 1
      }
    } else {
      atom(c === "." ? 4 : 1)
      const code = pattern.codePointAt(i) ?? 0
      i += code > 0xffff ? 2 : 1
    }
  }
  let size = 0
  for (const frame of frames) size += frame.total + frame.last
  return size
}

/** Frees RE2's WASM memory now: re2-wasm has no finalizer, and its heap is a fixed 16 MiB that aborts when full. */
const release = (re: RE2) => {
  const wrapper: unknown = Reflect.get(re, "wrapper")
  if (typeof wrapper === "object" && wrapper !== null && "delete" in wrapper && typeof wrapper.delete === "function") {
    wrapper.delete()
  }
}

/** Thrown while compiling a schema (registration): the pattern cannot be used. */
export class UnsupportedPattern extends Error {}

interface Session {
  spentMs: number
  /** Pattern source → why a string was not checked against it. */
  readonly refused: Map<string, string>
}

export interface PatternEngine {
  /** ajv's `code.regExp`. */
  readonly regExp: RegExpEngine
  /** Runs one validation with a fresh time budget; `refused` says which patterns were not checked, and why (the check then failed). */
  readonly session: <A>(run: () => A) => { readonly value: A; readonly refused: ReadonlyMap<string, string> }
  /** After a validation was terminated (hardDeadline.ts): a WASM call it cut short leaves the module unusable, so it is reloaded. */
  readonly recover: () => void
}

export const makePatternEngine = (): PatternEngine => {
  // Loaded on first use (≈ 8 MiB of WASM a process without `pattern`s never needs).
  let Engine: typeof RE2 | undefined
  /**
   * re2-wasm's heap is a fixed 16 MiB and an RE2 object's DFA cache may grow to ~8 MiB: a few heavy patterns can fill it,
   * and then the module aborts for good. Objects are freed explicitly, recompiled now and then, and an abort loads a
   * fresh module (the check that hit it is refused, so nothing passes unchecked).
   */
  const compiled = new Map<string, { readonly re: RE2; chars: number }>()
  let current: Session = { spentMs: 0, refused: new Map() }

  const drop = (source: string) => {
    const entry = compiled.get(source)
    if (entry !== undefined) release(entry.re)
    compiled.delete(source)
  }

  const reload = () => {
    compiled.clear() // the old module's memory goes with it
    Engine = loadRE2()
  }

  const compile = (source: string) => {
    const hit = compiled.get(source)
    if (hit !== undefined && hit.chars < RECOMPILE_AFTER_CHARS) {
      compiled.delete(source)
      compiled.set(source, hit) // most recently used last
      return hit
    }
    drop(source)
    const oldest = compiled.size >= CACHED_PATTERNS ? compiled.keys().next() : undefined
    if (oldest !== undefined && oldest.done !== true) drop(oldest.value)
    Engine ??= loadRE2()
    const entry = { re: new Engine(source, "u"), chars: 0 }
    compiled.set(source, entry)
    return entry
  }

  /** Set while a call into the module runs: still set after a termination means the call was cut short. */
  let inModule = false

  /** Runs `f` on the engine; a WASM abort reloads the module and rethrows. */
  const guarded = <A>(f: () => A): A => {
    inModule = true
    try {
      const value = f()
      inModule = false
      return value
    } catch (error) {
      inModule = false
      if (error instanceof Error && error.name === "RuntimeError") reload() // a WASM abort
      throw error
    }
  }

  const recover = () => {
    if (!inModule) return
    inModule = false
    compiled.clear()
    Engine = undefined // loaded afresh at the next use
  }

  const admit = (source: string): number => {
    if (source.length > MAX_PATTERN_LENGTH) {
      throw new UnsupportedPattern(`pattern is longer than ${MAX_PATTERN_LENGTH} characters`)
    }
    const size = patternSize(source)
    if (size > MAX_PATTERN_SIZE) {
      throw new UnsupportedPattern(
        `pattern "${source.slice(0, 80)}" is too large (about ${size} units once repetitions are expanded, at most ${MAX_PATTERN_SIZE})`
      )
    }
    try {
      guarded(() => compile(source))
    } catch (error) {
      const detail = error instanceof Error ? error.message.replace(/^Invalid regular expression: /, "") : String(error)
      throw new UnsupportedPattern(
        `pattern "${source.slice(0, 80)}" is not supported: patterns run on RE2 (linear time), without lookahead, lookbehind or backreferences (${detail.slice(0, 160)})`
      )
    }
    return size
  }

  const test = (source: string, size: number, subject: string): boolean => {
    const session = current
    if (session.refused.has(source)) return false
    if (subject.length * size > MAX_PATTERN_WORK) {
      const limit = Math.floor(MAX_PATTERN_WORK / size)
      session.refused.set(source, `is too long to be checked against pattern "${source.slice(0, 80)}" (at most ${limit} characters for this pattern)`)
      return false
    }
    if (session.spentMs >= PATTERN_BUDGET_MS) {
      session.refused.set(source, `could not be checked against pattern "${source.slice(0, 80)}": pattern checks took longer than ${PATTERN_BUDGET_MS} ms`)
      return false
    }
    const started = performance.now()
    try {
      return guarded(() => {
        const entry = compile(source)
        entry.chars += subject.length
        return entry.re.test(subject)
      })
    } catch (error) {
      const detail = error instanceof Error ? error.message.slice(0, 120) : String(error)
      session.refused.set(source, `could not be checked against pattern "${source.slice(0, 80)}" (${detail}); try again`)
      return false
    } finally {
      session.spentMs += performance.now() - started
    }
  }

  const regExp: RegExpEngine = Object.assign(
    (source: string, _flags: string) => {
      const size = Math.max(1, admit(source))
      // ajv keeps one compiled pattern per distinct toString(): it must name the source.
      return { test: (subject: string) => test(source, size, subject), toString: () => `/${source}/u` }
    },
    { code: "patternEngine" }
  )

  const session = <A>(run: () => A) => {
    const previous = current
    current = { spentMs: 0, refused: new Map() }
    try {
      const value = run()
      return { value, refused: current.refused }
    } finally {
      current = previous
    }
  }

  return { regExp, session, recover }
}
