/**
 * The devnet's pid file: which anvil serves a state directory, so that an anvil orphaned by a SIGKILLed service is
 * stopped at the next start instead of running beside the new one (holding the port, writing the same files).
 * A process is stopped only when it is provably that anvil: same pid, same start time, an anvil command line that
 * names this directory's dump file; and never while it is still the child of the service that started it.
 */
import { execFile } from "node:child_process";
import { readFile, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { promisify } from "node:util";
import { writeFileAtomic } from "./stateFile.js";

const exec = promisify(execFile);

export const pidFileFor = (stateFile: string): string => join(dirname(stateFile), "anvil.pid");

interface PidRecord {
  readonly pid: number;
  /** Start time in clock ticks since boot (/proc/<pid>/stat field 22), guarding against a reused pid. */
  readonly startTime: string | undefined;
  /** The service that started it: while anvil is still its child, the devnet is in use. */
  readonly parentPid: number | undefined;
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else (so it is not ours either way)
    return typeof error === "object" && error !== null && "code" in error && error.code === "EPERM";
  }
};

/** Fields of /proc/<pid>/stat after the parenthesised command name (state is [0], ppid [1], starttime [19]). */
const statFields = async (pid: number): Promise<ReadonlyArray<string> | undefined> => {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined);
  return stat?.slice(stat.lastIndexOf(")") + 2).split(" ");
};

const startTimeOf = async (pid: number): Promise<string | undefined> => (await statFields(pid))?.[19];

const commandLine = async (pid: number): Promise<ReadonlyArray<string> | undefined> => {
  const proc = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => undefined);
  if (proc !== undefined) return proc.split("\0").filter((a) => a !== "");
  if (process.platform === "linux") return undefined;
  // No /proc (macOS): ps prints the command line space-separated, good enough to find an argument.
  const ps = await exec("ps", ["-p", String(pid), "-o", "command="]).catch(() => undefined);
  return ps?.stdout.trim().split(/\s+/);
};

const parentOf = async (pid: number): Promise<number | undefined> => {
  const fields = await statFields(pid);
  const text = fields?.[1] ?? (await exec("ps", ["-p", String(pid), "-o", "ppid="]).catch(() => undefined))?.stdout.trim();
  const ppid = Number(text);
  return Number.isInteger(ppid) && ppid > 0 ? ppid : undefined;
};

export const writePidFile = async (file: string, pid: number): Promise<void> => {
  const record: PidRecord = { pid, startTime: await startTimeOf(pid), parentPid: process.pid };
  await writeFileAtomic(file, `${JSON.stringify(record)}\n`);
};

export const removePidFile = (file: string): Promise<void> => rm(file, { force: true });

const readPidFile = async (file: string): Promise<PidRecord | undefined> => {
  const text = await readFile(file, "utf8").catch(() => undefined);
  if (text === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null && "pid" in parsed && Number.isInteger(parsed.pid) && Number(parsed.pid) > 1) {
      const startTime = "startTime" in parsed && typeof parsed.startTime === "string" ? parsed.startTime : undefined;
      const parentPid = "parentPid" in parsed && Number.isInteger(parsed.parentPid) ? Number(parsed.parentPid) : undefined;
      return { pid: Number(parsed.pid), startTime, parentPid };
    }
  } catch {
    // unreadable: treated as no record
  }
  return undefined;
};

/** Whether `record` still names the anvil we started for `dumpFile` (and not a process that reused its pid). */
const isOurAnvil = async (record: PidRecord, dumpFile: string): Promise<boolean> => {
  const args = await commandLine(record.pid);
  if (args === undefined || args[0] === undefined || !basename(args[0]).startsWith("anvil")) return false;
  if (!args.includes(dumpFile)) return false;
  if (record.startTime === undefined) return true;
  return (await startTimeOf(record.pid)) === record.startTime;
};

export class DevnetInUseError extends Error {
  override readonly name = "DevnetInUseError";
}

const waitForExit = async (pid: number, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid)) {
    // A zombie (exited, not yet reaped by its parent) counts as gone.
    if ((await statFields(pid))?.[0] === "Z") return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
};

/**
 * Stops the anvil a previous run left behind for this state directory, if any: SIGTERM (it writes its final state to
 * `dumpFile`), SIGKILL after 3 s. Refuses when the service that started it is still running.
 *
 * @returns the pid that was stopped, or undefined.
 */
export const stopStaleAnvil = async (pidFile: string, dumpFile: string): Promise<number | undefined> => {
  const record = await readPidFile(pidFile);
  if (record === undefined || !isAlive(record.pid) || !(await isOurAnvil(record, dumpFile))) {
    await removePidFile(pidFile);
    return undefined;
  }
  // Still the child of the service that started it (a dead parent's children are re-parented): in use.
  const ppid = await parentOf(record.pid);
  if (ppid !== undefined && ppid === record.parentPid && ppid !== process.pid) {
    throw new DevnetInUseError(
      `the devnet in ${dirname(pidFile)} is in use by another running service (anvil pid ${record.pid}, service pid ${ppid}). Stop it or choose another DATA_DIR.`,
    );
  }
  process.kill(record.pid, "SIGTERM");
  if (!(await waitForExit(record.pid, 3_000))) {
    process.kill(record.pid, "SIGKILL");
    await waitForExit(record.pid, 2_000);
  }
  await removePidFile(pidFile);
  return record.pid;
};
