/**
 * The devnet's chain state on disk, never half-written: saved by us through `anvil_dumpState` (temporary file, fsync,
 * rename) whenever the chain head moves, and anvil's own dump on SIGTERM goes to a side file that replaces the state
 * file only once it is complete. anvil's `--state`/`--state-interval` is not used: it truncates the file in place every
 * second, so a reader (a second anvil, a crash at the wrong moment) could find it empty.
 */
import { randomBytes } from "node:crypto";
import { open, readFile, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { promisify } from "node:util";
import { gunzip } from "node:zlib";

const gunzipAsync = promisify(gunzip);

/** Writes `data` to a temporary file beside `file`, syncs it and renames it over `file` (atomic on POSIX). */
export const writeFileAtomic = async (file: string, data: string | Uint8Array): Promise<void> => {
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  const handle = await open(tmp, "w", 0o600);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(tmp, file);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
};

/** Where anvil writes its state when it is stopped with SIGTERM (`--dump-state`). */
export const exitDumpFile = (stateFile: string): string => `${stateFile.replace(/\.json$/, "")}.exit.json`;

/** A complete anvil state dump: JSON with a block (a truncated file does not parse). */
const isCompleteState = (text: string): boolean => {
  try {
    const parsed: unknown = JSON.parse(text);
    return typeof parsed === "object" && parsed !== null && "block" in parsed && "accounts" in parsed;
  } catch {
    return false;
  }
};

/**
 * anvil's SIGTERM dump, when complete, becomes the state file (it is the newest state there is); an incomplete one
 * (anvil killed while writing) is dropped and the last state we saved stays.
 */
export const promoteExitDump = async (stateFile: string): Promise<void> => {
  const side = exitDumpFile(stateFile);
  const text = await readFile(side, "utf8").catch(() => undefined);
  if (text === undefined) return;
  if (isCompleteState(text)) await rename(side, stateFile);
  else await rm(side, { force: true });
};

const rpc = async (rpcUrl: string, method: string, params: ReadonlyArray<unknown>): Promise<unknown> => {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(10_000),
  });
  const body: unknown = await res.json();
  if (typeof body === "object" && body !== null && "result" in body) return body.result;
  throw new Error(`${method}: ${JSON.stringify(body).slice(0, 200)}`);
};

/** The head's hash: it changes with every block and with a revert. */
const headHash = async (rpcUrl: string): Promise<string> => {
  const block = await rpc(rpcUrl, "eth_getBlockByNumber", ["latest", false]);
  if (typeof block === "object" && block !== null && "hash" in block && typeof block.hash === "string") return block.hash;
  throw new Error("eth_getBlockByNumber: no hash");
};

/** anvil_dumpState answers gzip-compressed JSON as hex; --load-state reads the plain JSON. */
const dumpState = async (rpcUrl: string): Promise<Buffer> => {
  const hex = await rpc(rpcUrl, "anvil_dumpState", []);
  if (typeof hex !== "string" || !hex.startsWith("0x")) throw new Error("anvil_dumpState: not hex");
  return gunzipAsync(Buffer.from(hex.slice(2), "hex"));
};

export interface StateSaver {
  /** Saves now if the head moved since the last save. */
  readonly flush: () => Promise<void>;
  /** Stops the timer and waits for a save in flight. */
  readonly stop: () => Promise<void>;
}

/** Saves the chain to `stateFile` every `intervalMs` when its head moved (one cheap RPC call when it did not). */
export const startStateSaver = (rpcUrl: string, stateFile: string, intervalMs = 1_000): StateSaver => {
  let savedHead: string | undefined;
  let inFlight: Promise<void> = Promise.resolve();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const saveIfMoved = async (): Promise<void> => {
    const head = await headHash(rpcUrl);
    if (head === savedHead) return;
    await writeFileAtomic(stateFile, await dumpState(rpcUrl));
    savedHead = head;
  };
  const flush = (): Promise<void> => {
    inFlight = inFlight.then(saveIfMoved);
    return inFlight;
  };
  const tick = (): void => {
    // A failed periodic save (anvil busy or stopping) is retried at the next tick; stop() flushes once more.
    flush()
      .catch(() => undefined)
      .finally(() => {
        if (!stopped) schedule();
      });
  };
  const schedule = (): void => {
    timer = setTimeout(tick, intervalMs);
    timer.unref();
  };
  schedule();
  return {
    flush,
    stop: async () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      await inFlight.catch(() => undefined);
    },
  };
};
