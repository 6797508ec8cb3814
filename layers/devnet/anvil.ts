/**
 * Local devnet: an anvil child process posing as Base Sepolia (chain id 84532) with our TestUSDC
 * deployed from dev account 0 at nonce 0 (deterministic address) and 10,000 USDC minted to each
 * of dev accounts 1..9, and the SettlementBatcher (batcher.ts) at its own fixed address. Account 0
 * is the platform treasury and holds no USDC.
 *
 * Plain async code; the caller wraps `startDevnet`/`stop` in a scoped resource. The pieces:
 * accounts.ts (fixed identity), process.ts (the child process), pidFile.ts (a stale anvil from a
 * killed run), stateFile.ts (chain state on disk), token.ts (deploy + mint), batcher.ts (the
 * settlement batcher), compile.ts (solc).
 */
import { existsSync } from "node:fs";
import { dirname } from "node:path";
import { ensureWritableDir } from "../dataDir.js";
import { DEV_ACCOUNTS, DEVNET_CHAIN_ID, DEVNET_MNEMONIC, DEVNET_SECOND_CHAIN_ID, DEVNET_SECOND_USDC_ADDRESS, DEVNET_USDC_ADDRESS } from "./accounts.js";
import { DEVNET_SECOND_SETTLEMENT_BATCHER_ADDRESS, DEVNET_SETTLEMENT_BATCHER_ADDRESS, ensureBatcher } from "./batcher.js";
import { placeChannelContracts } from "./channels/place.js";
import { type CompiledContract, compileContract, compileTestUsdc, SETTLEMENT_BATCHER } from "./compile.js";
import { pidFileFor, removePidFile, stopStaleAnvil, writePidFile } from "./pidFile.js";
import { AnvilStartError, spawnAnvil } from "./process.js";
import { exitDumpFile, promoteExitDump, startStateSaver } from "./stateFile.js";
import { ensureToken } from "./token.js";

export {
  DEV_PRIVATE_KEYS,
  DEVNET_CHAIN_ID,
  DEVNET_INITIAL_USDC,
  DEVNET_MNEMONIC,
  DEVNET_SECOND_CHAIN_ID,
  DEVNET_SECOND_USDC_ADDRESS,
  DEVNET_USDC_ADDRESS,
  devnetChain,
} from "./accounts.js";
export { DEVNET_SECOND_SETTLEMENT_BATCHER_ADDRESS, DEVNET_SETTLEMENT_BATCHER_ADDRESS } from "./batcher.js";
export { resolveAnvilBinary } from "./process.js";

export interface DevnetOptions {
  /**
   * 0 or undefined => a free port on 127.0.0.1 (anvil binds port 0 and reports the port it got). A
   * fixed port that another process holds is replaced by a free one (the chain state does not depend
   * on the port) and `onPortTaken` is told; with `strictPort` start-up fails instead.
   */
  readonly port?: number;
  readonly strictPort?: boolean;
  /** Called when the fixed port was taken and anvil listens elsewhere; default: a line on stderr. */
  readonly onPortTaken?: (requestedPort: number, rpcUrl: string) => void;
  /**
   * When set, the chain state is kept there (loaded on start if the file exists, saved atomically
   * whenever the chain moves and on stop), so a restarted devnet keeps balances and the deployed
   * token. Its directory also holds `anvil.pid`: an anvil left running by a killed service is
   * stopped at the next start.
   */
  readonly stateFile?: string;
  /** Cache dir for the compiled TestUSDC; when omitted the contract is compiled (once per process). */
  readonly compileCacheDir?: string;
  /** Seconds between blocks; undefined => automine (a block per transaction). */
  readonly blockTime?: number;
  /**
   * "second": the devnet's second network (chain id 1, posing as Ethereum mainnet), with its own TestUSDC and batcher
   * at other addresses than the primary's. Default "primary" (chain id 84532).
   */
  readonly network?: "primary" | "second";
  /** The second network's chain id: 1 (Ethereum) by default; a chain x402 v1 names (137, Polygon) lets v1 clients pay it too. */
  readonly secondChainId?: number;
}

export interface Devnet {
  readonly rpcUrl: string;
  readonly chainId: number;
  readonly usdcAddress: `0x${string}`;
  /** The SettlementBatcher (many transferWithAuthorization in one transaction). */
  readonly batcherAddress: `0x${string}`;
  readonly mnemonic: "test test test test test test test test test test test junk";
  /** The 10 well-known anvil dev accounts, index 0..9. Account 0 is the platform treasury. */
  readonly accounts: ReadonlyArray<{ address: `0x${string}`; privateKey: `0x${string}` }>;
  /** anvil's process id. */
  readonly pid: number;
  /** Saves the state, SIGTERMs anvil (SIGKILL after 2 s); resolves once the process has exited. Idempotent. */
  readonly stop: () => Promise<void>;
}

const announcePortTaken = (requestedPort: number, rpcUrl: string): void => {
  console.warn(`devnet: port ${requestedPort} is in use by another process; anvil listens on ${rpcUrl} instead`);
};

/**
 * Start anvil (chain id 84532) and make sure TestUSDC is deployed at DEVNET_USDC_ADDRESS with
 * 10,000 USDC on each of accounts 1..9 (deployed + minted only when not already in the state file).
 */
export const startDevnet = async (options: DevnetOptions = {}): Promise<Devnet> => {
  const stateFile = options.stateFile;
  const files =
    stateFile === undefined ? undefined : { state: stateFile, pid: pidFileFor(stateFile), exitDump: exitDumpFile(stateFile) };
  if (files !== undefined) {
    await ensureWritableDir(dirname(files.state), "the devnet state directory");
    await stopStaleAnvil(files.pid, files.exitDump);
    await promoteExitDump(files.state);
  }

  // On a fresh chain, compile (or read the cache) while anvil boots. With a state file the token is
  // usually there already: compile only if it turns out to be missing (solc blocks the event loop).
  const second = options.network === "second";
  const chainId = second ? options.secondChainId ?? DEVNET_SECOND_CHAIN_ID : DEVNET_CHAIN_ID;
  const fresh = files === undefined || !existsSync(files.state);
  let compiled: Promise<CompiledContract> | undefined;
  const getCompiled = (): Promise<CompiledContract> => (compiled ??= compileTestUsdc(options.compileCacheDir));
  if (fresh) getCompiled().catch(() => undefined); // handled when awaited; no unhandled rejection if anvil fails first

  const spawnOn = (port: number) =>
    spawnAnvil({
      port,
      ...(files === undefined ? {} : { dumpState: files.exitDump }),
      ...(files === undefined || fresh ? {} : { loadState: files.state }),
      ...(options.blockTime === undefined ? {} : { blockTime: options.blockTime }),
      chainId,
    });
  const port = options.port ?? 0;
  const anvil = await spawnOn(port).catch(async (error: unknown) => {
    if (port === 0 || options.strictPort === true || !(error instanceof AnvilStartError) || !error.portInUse) throw error;
    const elsewhere = await spawnOn(0);
    (options.onPortTaken ?? announcePortTaken)(port, elsewhere.rpcUrl);
    return elsewhere;
  });
  const saver = files === undefined ? undefined : startStateSaver(anvil.rpcUrl, files.state);

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (saver !== undefined) {
        await saver.stop();
        await saver.flush().catch(() => undefined); // anvil's own SIGTERM dump below covers a failed save
      }
      await anvil.stop();
      if (files !== undefined) {
        await promoteExitDump(files.state);
        await removePidFile(files.pid);
      }
    })());

  try {
    if (files !== undefined) await writePidFile(files.pid, anvil.pid);
    // Different senders (dev account 0, the batcher's own deployer): no nonce is shared, so both at once.
    await Promise.all([
      ensureToken(anvil.rpcUrl, getCompiled, second ? { chainId, address: DEVNET_SECOND_USDC_ADDRESS, nonce: 1 } : undefined),
      ensureBatcher(anvil.rpcUrl, () => compileContract(SETTLEMENT_BATCHER, options.compileCacheDir), second ? { chainId, nonce: 1 } : undefined),
      // x402's channel and upto contracts at their canonical addresses (no transaction: anvil_setCode).
      placeChannelContracts(anvil.rpcUrl, { replaceForeign: true }),
    ]);
    await saver?.flush();
  } catch (e) {
    await stop();
    throw e;
  }

  return {
    rpcUrl: anvil.rpcUrl,
    chainId,
    usdcAddress: second ? DEVNET_SECOND_USDC_ADDRESS : DEVNET_USDC_ADDRESS,
    batcherAddress: second ? DEVNET_SECOND_SETTLEMENT_BATCHER_ADDRESS : DEVNET_SETTLEMENT_BATCHER_ADDRESS,
    mnemonic: DEVNET_MNEMONIC,
    accounts: DEV_ACCOUNTS,
    pid: anvil.pid,
    stop,
  };
};
