/**
 * The contracts of x402's `batch-settlement` and `upto` schemes, at the addresses the official clients use. On public
 * chains the official deployments are there; on local chains we place our own implementations of their published
 * interfaces (contracts/*.sol) at the same addresses (layers/x402/channelContracts.ts).
 * test/unit/channelContractsArtifact.test.ts holds those addresses equal to `@x402/evm`'s constants (a dev dependency,
 * so not imported here) and each shipped artifact equal to a fresh compile of its source.
 */
import { fileURLToPath } from "node:url";
import type { Address } from "viem";
import {
  BATCH_SETTLEMENT_ADDRESS,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  MULTICALL3_ADDRESS,
  PERMIT2_ADDRESS,
  PERMIT2_DEPOSIT_COLLECTOR_ADDRESS,
  UPTO_PERMIT2_PROXY_ADDRESS,
} from "../../x402/channelContracts.js";
import type { ContractSpec } from "../compile.js";
import { shippedErc3009DepositCollector } from "./erc3009DepositCollector.generated.js";
import { shippedMulticall3 } from "./multicall3.generated.js";
import { shippedPermit2 } from "./permit2.generated.js";
import { shippedPermit2DepositCollector } from "./permit2DepositCollector.generated.js";
import { shippedX402BatchSettlement } from "./x402BatchSettlement.generated.js";
import { shippedX402UptoPermit2Proxy } from "./x402UptoPermit2Proxy.generated.js";

/** One contract: where it lives, how to build ours, and where its shipped artifact is written. */
export interface ChannelContract {
  readonly name: string;
  readonly address: Address;
  readonly spec: ContractSpec;
  /** The generated file (`npm run devnet:artifact`) and the name it exports. */
  readonly path: string;
  readonly exportName: string;
}

const contract = (
  name: string,
  address: Address,
  file: string,
  generated: string,
  exportName: string,
  shipped: ContractSpec["shipped"],
): ChannelContract => ({
  name,
  address,
  spec: {
    sourcePath: fileURLToPath(new URL(`../../../contracts/${file}`, import.meta.url)),
    sourceName: file,
    contractName: name,
    shipped,
  },
  path: fileURLToPath(new URL(`./${generated}`, import.meta.url)),
  exportName,
});

/** In the order `npm run deploy:channels` reports them (all are placed at once: no code runs while placing). */
export const CHANNEL_CONTRACTS: ReadonlyArray<ChannelContract> = [
  contract("Permit2", PERMIT2_ADDRESS, "Permit2.sol", "permit2.generated.ts", "shippedPermit2", shippedPermit2),
  contract(
    "x402BatchSettlement",
    BATCH_SETTLEMENT_ADDRESS,
    "X402BatchSettlement.sol",
    "x402BatchSettlement.generated.ts",
    "shippedX402BatchSettlement",
    shippedX402BatchSettlement,
  ),
  contract(
    "ERC3009DepositCollector",
    ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
    "ERC3009DepositCollector.sol",
    "erc3009DepositCollector.generated.ts",
    "shippedErc3009DepositCollector",
    shippedErc3009DepositCollector,
  ),
  contract(
    "Permit2DepositCollector",
    PERMIT2_DEPOSIT_COLLECTOR_ADDRESS,
    "Permit2DepositCollector.sol",
    "permit2DepositCollector.generated.ts",
    "shippedPermit2DepositCollector",
    shippedPermit2DepositCollector,
  ),
  contract(
    "x402UptoPermit2Proxy",
    UPTO_PERMIT2_PROXY_ADDRESS,
    "X402UptoPermit2Proxy.sol",
    "x402UptoPermit2Proxy.generated.ts",
    "shippedX402UptoPermit2Proxy",
    shippedX402UptoPermit2Proxy,
  ),
  contract("Multicall3", MULTICALL3_ADDRESS, "Multicall3.sol", "multicall3.generated.ts", "shippedMulticall3", shippedMulticall3),
];
