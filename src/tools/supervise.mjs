// The supervisor `npm start` runs: a small process that serves no request. It starts the server (the bundle) as its
// child, in a process group of its own, and when the server dies (an OOM abort, SIGKILL, a crash) it stops whatever the
// server had started (the embedded PostgreSQL, anvil, cluster workers: they are in that group) and starts it again.
// When the supervisor itself dies, even by SIGKILL, the server sees its IPC channel close and stops (src/cluster/supervised.ts).
// Plain JavaScript with Node's own modules only: it stays small (≈ 40 MB resident) and loads in milliseconds.
import { spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"

/** Replacements allowed within WINDOW_MS before the supervisor gives up (a crash loop stops the service). */
const MAX_RESTARTS = 5
const WINDOW_MS = 60_000
/** How long what a dead server started gets to stop (PostgreSQL's fast shutdown, anvil's state dump) before SIGKILL. */
const GROUP_GRACE_MS = 10_000
/** How long a server asked to stop gets before its whole group is killed. */
const STOP_GRACE_MS = 30_000

const json = process.env["LOG_FORMAT"] === "json"
const log = (level, msg, fields = {}) => {
  if (json) process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, supervisorPid: process.pid, ...fields })}\n`)
  else process.stderr.write(`agent marketplace supervisor (pid ${process.pid}): ${msg}\n`)
}

const describeExit = (code, signal) => (signal === null ? `exit code ${code ?? "?"}` : `signal ${signal}`)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Live (not zombie) members of process group `pgid`: from /proc on Linux, else whether the group answers a signal. */
const groupAlive = (pgid) => {
  let entries
  try {
    entries = readdirSync("/proc").filter((e) => /^\d+$/.test(e))
  } catch {
    try {
      process.kill(-pgid, 0)
      return true
    } catch {
      return false
    }
  }
  for (const entry of entries) {
    let stat
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8")
    } catch {
      continue
    }
    // After the parenthesised command: state ppid pgrp ...
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (Number(pgrp) === pgid && state !== "Z" && state !== "X") return true
  }
  return false
}

const signalGroup = (pgid, signal) => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // the group is empty
  }
}

/**
 * Stops every process left in the dead server's group: SIGINT first (PostgreSQL's fast shutdown, as Ctrl-C in a
 * terminal; anvil writes its state), SIGKILL after the grace. Resolves once the group is empty.
 */
const stopGroup = async (pgid) => {
  if (!groupAlive(pgid)) return
  signalGroup(pgid, "SIGINT")
  const deadline = Date.now() + GROUP_GRACE_MS
  while (groupAlive(pgid)) {
    if (Date.now() > deadline) {
      signalGroup(pgid, "SIGKILL")
      for (let i = 0; i < 100 && groupAlive(pgid); i++) await sleep(20)
      return
    }
    await sleep(20)
  }
}

/** Runs the server (`node <execArgv> <bundle>`) until a signal stops it; returns the exit code for this process. */
export const supervise = (bundle) =>
  new Promise((resolve) => {
    let server
    let stopping = false
    let exits = []
    const startServer = (replacing) => {
      const started = Date.now()
      const child = spawn(process.execPath, [...process.execArgv, bundle], {
        // Its own process group: what it starts goes with it, and Ctrl-C reaches it through us, once.
        detached: true,
        stdio: ["ignore", "inherit", "inherit", "ipc"],
        // Two malloc arenas instead of glibc's 8 per core: idle RSS −12 MiB, peak −19, CPU per paid call unchanged
        // (bench/analysis.md, "Idle RSS"). A MALLOC_ARENA_MAX already set wins.
        env: { MALLOC_ARENA_MAX: "2", ...process.env, MARKETPLACE_SUPERVISED: "1" }
      })
      server = { child, ready: false, replacement: replacing !== undefined }
      const current = server
      child.on("message", (message) => {
        if (typeof message !== "object" || message === null || message.type !== "ready") return
        current.ready = true
        if (replacing !== undefined) log("info", `server pid ${child.pid} is serving again (replacing pid ${replacing.pid}, ${Date.now() - replacing.at} ms after it died)`, { serverPid: child.pid, replacing: replacing.pid, restartMs: Date.now() - replacing.at })
      })
      child.once("error", (error) => {
        // No process, so no exit event: nothing to wait for.
        if (child.pid !== undefined) return
        log("error", `the server could not be started: ${error.message}`)
        resolve(1)
      })
      child.once("exit", (code, signal) => void onExit(current, code, signal, started))
    }

    const onExit = async (ended, code, signal, started) => {
      const pid = ended.child.pid
      const diedAt = Date.now()
      // Whatever it started (PostgreSQL, anvil, workers) is in its group: stopped before anything else.
      if (pid !== undefined) await stopGroup(pid)
      if (stopping) return resolve(code ?? 1)
      if (!ended.ready && !ended.replacement) {
        // The first start failed (it said why): starting it again would only repeat that.
        return resolve(code === 0 || code === null ? 1 : code)
      }
      if (code === 0 && signal === null && ended.ready) {
        log("info", `the server (pid ${pid}) stopped by itself; stopping`)
        return resolve(0)
      }
      exits = [...exits.filter((t) => diedAt - t < WINDOW_MS), diedAt]
      const why = describeExit(code, signal)
      if (exits.length > MAX_RESTARTS) {
        log("error", `the server keeps dying (${exits.length} times within ${WINDOW_MS / 1000} s, the last: pid ${pid}, ${why}); giving up`)
        return resolve(1)
      }
      log("warn", `the server (pid ${pid}) died (${why}) after ${Math.round((diedAt - started) / 1000)} s; what it started is stopped; starting it again`, { serverPid: pid, exit: why })
      startServer({ pid, at: diedAt })
    }

    const stop = (signal) => {
      if (stopping) return
      stopping = true
      const { child } = server
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill(signal === "SIGHUP" ? "SIGTERM" : signal)
      setTimeout(() => child.pid !== undefined && signalGroup(child.pid, "SIGKILL"), STOP_GRACE_MS).unref()
    }
    for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => stop(signal))
    startServer(undefined)
  })
