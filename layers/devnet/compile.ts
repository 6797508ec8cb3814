/**
 * Compiles our contracts (`contracts/TestUSDC.sol`, `contracts/SettlementBatcher.sol`) with solc-js, with an optional
 * on-disk cache; the compiled contract shipped in a `*.generated.ts` file is used while it matches the source, the solc
 * version and the settings.
 *
 * solc-js is loaded lazily (`await import("solc")` costs ≈ 0.5 s on its own, the compile another
 * ≈ 0.5-1 s), so the shipped contract or a cache hit never loads the compiler at all.
 */
import { createHash, randomUUID } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Abi, Hex } from "viem";
import { shippedSettlementBatcher } from "./settlementBatcher.generated.js";
import { shippedTestUsdc } from "./testUsdc.generated.js";

export interface CompiledContract {
  readonly abi: Abi;
  /** Creation bytecode, 0x-prefixed. */
  readonly bytecode: Hex;
}

/** A contract of ours: its source file, its name, and the compiled result shipped with the code. */
export interface ContractSpec {
  readonly sourcePath: string;
  readonly sourceName: string;
  readonly contractName: string;
  readonly shipped: { readonly key: string; readonly abi: Abi; readonly bytecode: Hex };
}

export const TEST_USDC_SOURCE_PATH: string = fileURLToPath(
  new URL("../../contracts/TestUSDC.sol", import.meta.url),
);

export const TEST_USDC: ContractSpec = {
  sourcePath: TEST_USDC_SOURCE_PATH,
  sourceName: "TestUSDC.sol",
  contractName: "TestUSDC",
  shipped: shippedTestUsdc,
};

export const SETTLEMENT_BATCHER: ContractSpec = {
  sourcePath: fileURLToPath(new URL("../../contracts/SettlementBatcher.sol", import.meta.url)),
  sourceName: "SettlementBatcher.sol",
  contractName: "SettlementBatcher",
  shipped: shippedSettlementBatcher,
};

/** Compiler settings; part of the cache key. */
const settingsFor = (spec: ContractSpec) =>
  ({
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    outputSelection: { [spec.sourceName]: { [spec.contractName]: ["abi", "evm.bytecode.object"] } },
  }) as const;

const require = createRequire(import.meta.url);

/** solc's npm version (read from its package.json so a cache hit does not load the compiler). */
const solcPackageVersion = (): string => {
  const pkg: unknown = require("solc/package.json");
  if (isRecord(pkg) && typeof pkg["version"] === "string") return pkg["version"];
  throw new Error("compileTestUsdc: cannot read the version of the installed solc package");
};

/** In-process memo (solc runs and cache hits) by cache key: at most one compile per source/settings per process. */
const memo = new Map<string, Promise<CompiledContract>>();

/** sha256 of the source, the solc version and the settings: what the compiled contract depends on. */
export const contractKey = (spec: ContractSpec, source: string): string =>
  createHash("sha256")
    .update(JSON.stringify({ source, solc: solcPackageVersion(), settings: settingsFor(spec) }))
    .digest("hex");

export const readContractSource = (spec: ContractSpec): Promise<string> => readFile(spec.sourcePath, "utf8");

export const testUsdcKey = (source: string): string => contractKey(TEST_USDC, source);
export const readTestUsdcSource = (): Promise<string> => readContractSource(TEST_USDC);

/**
 * Compile a contract (optimizer on, 200 runs, evmVersion "cancun"), or take the shipped result
 * when it was made from the same source, solc version and settings.
 *
 * @param options.ignoreShipped compile (or read the cache) even when the shipped contract matches.
 * @param cacheDir when given, a compile's result is cached there as JSON in a file named after
 *   `testUsdcKey` (a hit never loads solc). When omitted there is no on-disk cache (still at most
 *   one compile per process).
 * @throws Error carrying solc's formatted messages when compilation reports errors.
 */
export const compileContract = async (
  spec: ContractSpec,
  cacheDir?: string,
  options: { readonly ignoreShipped?: boolean } = {},
): Promise<CompiledContract> => {
  const source = await readContractSource(spec);
  const key = contractKey(spec, source);
  if (key === spec.shipped.key && options.ignoreShipped !== true) {
    return { abi: spec.shipped.abi, bytecode: spec.shipped.bytecode };
  }
  const cacheFile = cacheDir === undefined ? undefined : cacheFileFor(spec, cacheDir, key);
  if (cacheFile !== undefined) {
    const cached = await readCache(cacheFile);
    if (cached !== undefined) {
      if (!memo.has(key)) memo.set(key, Promise.resolve(cached));
      return cached;
    }
  }

  const result = await memoCompile(spec, source, key);

  if (cacheDir !== undefined && cacheFile !== undefined) {
    await mkdir(cacheDir, { recursive: true });
    // Write-then-rename so a concurrent reader never sees a half-written file.
    const tmp = `${cacheFile}.${randomUUID()}.tmp`;
    await writeFile(tmp, JSON.stringify(result));
    await rename(tmp, cacheFile);
  }
  return result;
};

/** TestUSDC (see compileContract). */
export const compileTestUsdc = (cacheDir?: string, options: { readonly ignoreShipped?: boolean } = {}): Promise<CompiledContract> =>
  compileContract(TEST_USDC, cacheDir, options);

const memoCompile = (spec: ContractSpec, source: string, key: string): Promise<CompiledContract> => {
  let compiled = memo.get(key);
  if (compiled === undefined) {
    compiled = compile(spec, source);
    memo.set(key, compiled);
    compiled.catch(() => memo.delete(key)); // do not memoize failures
  }
  return compiled;
};

const cacheFileFor = (spec: ContractSpec, cacheDir: string, key: string): string =>
  join(cacheDir, `${spec.contractName}-${key.slice(0, 32)}.json`);

const readCache = async (file: string): Promise<CompiledContract | undefined> => {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch {
    return undefined;
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (isRecord(parsed) && isAbi(parsed["abi"]) && isHex(parsed["bytecode"])) {
      return { abi: parsed["abi"], bytecode: parsed["bytecode"] };
    }
  } catch {
    // corrupt cache file: fall through and recompile (it gets overwritten)
  }
  return undefined;
};

/** Always solc, never the shipped contract or a cache: for regenerating and checking the shipped contract. */
export const compileWithSolc = (source: string, spec: ContractSpec = TEST_USDC): Promise<CompiledContract> => compile(spec, source);

const compile = async (spec: ContractSpec, source: string): Promise<CompiledContract> => {
  const solc = (await import("solc")).default;
  // solc's typings are all `any`; pin the one function we use to a precise type.
  const compileStandard: (input: string) => string = solc.compile;
  const input = {
    language: "Solidity",
    sources: { [spec.sourceName]: { content: source } },
    settings: settingsFor(spec),
  };
  const output: unknown = JSON.parse(compileStandard(JSON.stringify(input)));
  if (!isRecord(output)) throw new Error("solc: unexpected output");

  const errors = Array.isArray(output["errors"]) ? output["errors"] : [];
  const fatal = errors.filter((e) => isRecord(e) && e["severity"] === "error");
  if (fatal.length > 0) {
    const text = fatal
      .map((e) =>
        isRecord(e) && typeof e["formattedMessage"] === "string"
          ? e["formattedMessage"]
          : JSON.stringify(e),
      )
      .join("\n");
    throw new Error(`solc failed to compile ${spec.sourceName}:\n${text}`);
  }

  const contracts = output["contracts"];
  const file = isRecord(contracts) ? contracts[spec.sourceName] : undefined;
  const contract = isRecord(file) ? file[spec.contractName] : undefined;
  const evm = isRecord(contract) ? contract["evm"] : undefined;
  const bytecode = isRecord(evm) ? evm["bytecode"] : undefined;
  const object = isRecord(bytecode) ? bytecode["object"] : undefined;
  const abi = isRecord(contract) ? contract["abi"] : undefined;
  if (typeof object !== "string" || object.length === 0 || !isAbi(abi)) {
    throw new Error(`solc: no bytecode/abi for ${spec.contractName} in output`);
  }
  return { abi, bytecode: `0x${object}` };
};

const isRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u);

const isAbi = (u: unknown): u is Abi =>
  Array.isArray(u) && u.every((item) => isRecord(item) && typeof item["type"] === "string");

const isHex = (u: unknown): u is Hex => typeof u === "string" && /^0x[0-9a-fA-F]+$/.test(u);
