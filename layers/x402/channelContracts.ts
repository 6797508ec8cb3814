/**
 * Where x402's `batch-settlement` (payment channels) and `upto` (Permit2) schemes expect their contracts: the
 * canonical addresses `@x402/evm` addresses them by (the same on every chain). On a public chain the official
 * deployments are there; at start the service checks for their code and offers a scheme only when every contract it
 * needs has code. On local chains `npm run deploy:channels` (and the devnet at start) places our own implementations
 * there (layers/devnet/channels/).
 */
import type { Address, Hex } from "viem";

export type ChannelScheme = "batch-settlement" | "upto";

export const BATCH_SETTLEMENT_ADDRESS: Address = "0x4020074e9dF2ce1deE5A9C1b5c3f541D02a10003";
export const ERC3009_DEPOSIT_COLLECTOR_ADDRESS: Address = "0x4020806089470a89826cB9fB1f4059150b550004";
export const PERMIT2_DEPOSIT_COLLECTOR_ADDRESS: Address = "0x4020425FAf3B746C082C2f942b4E5159887B0005";
/** Uniswap's canonical Permit2. */
export const PERMIT2_ADDRESS: Address = "0x000000000022D473030F116dDEE9F6B43aC78BA3";
export const UPTO_PERMIT2_PROXY_ADDRESS: Address = "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002";
/** The canonical Multicall3: `@x402/evm`'s facilitators read channel, allowance and balance state through it. */
export const MULTICALL3_ADDRESS: Address = "0xcA11bde05977b3631167028862bE2a173976CA11";

export interface SchemeContract {
  readonly name: string;
  readonly address: Address;
}

/** The contracts each scheme cannot work without (both deposit methods of `batch-settlement`; the official facilitator's reads). */
export const SCHEME_CONTRACTS: { readonly [S in ChannelScheme]: ReadonlyArray<SchemeContract> } = {
  "batch-settlement": [
    { name: "x402BatchSettlement", address: BATCH_SETTLEMENT_ADDRESS },
    { name: "ERC3009DepositCollector", address: ERC3009_DEPOSIT_COLLECTOR_ADDRESS },
    { name: "Permit2DepositCollector", address: PERMIT2_DEPOSIT_COLLECTOR_ADDRESS },
    { name: "Permit2", address: PERMIT2_ADDRESS },
    { name: "Multicall3", address: MULTICALL3_ADDRESS },
  ],
  upto: [
    { name: "Permit2", address: PERMIT2_ADDRESS },
    { name: "x402UptoPermit2Proxy", address: UPTO_PERMIT2_PROXY_ADDRESS },
    { name: "Multicall3", address: MULTICALL3_ADDRESS },
  ],
};

/** What the check needs of a chain client (viem's `PublicClient` has it). */
export interface CodeReader {
  readonly getCode: (args: { readonly address: Address }) => Promise<Hex | undefined>;
}

export interface ChannelContractsPresence {
  readonly network: string;
  /** The schemes whose every contract has code. */
  readonly present: ReadonlyArray<ChannelScheme>;
  /** Per scheme left out: the contracts without code. */
  readonly missing: ReadonlyArray<{ readonly scheme: ChannelScheme; readonly contracts: ReadonlyArray<SchemeContract> }>;
  /** One line per scheme left out, for the start-up log ("upto not offered on eip155:8453: no code at …"). */
  readonly lines: ReadonlyArray<string>;
}

/**
 * Reads the code at each canonical address once (in parallel) and says which schemes can be offered on `network`.
 * A failed read rejects: the caller decides whether an unreachable chain blocks the start.
 */
export const channelContractsPresent = async (client: CodeReader, network: string): Promise<ChannelContractsPresence> => {
  const addresses = [...new Set(Object.values(SCHEME_CONTRACTS).flatMap((list) => list.map((c) => c.address)))];
  const codes = await Promise.all(addresses.map((address) => client.getCode({ address })));
  const hasCode = new Map(addresses.map((address, i) => [address, codes[i] !== undefined && codes[i] !== "0x"]));
  const present: Array<ChannelScheme> = [];
  const missing: Array<{ scheme: ChannelScheme; contracts: ReadonlyArray<SchemeContract> }> = [];
  for (const scheme of ["batch-settlement", "upto"] as const) {
    const absent = SCHEME_CONTRACTS[scheme].filter((c) => hasCode.get(c.address) !== true);
    if (absent.length === 0) present.push(scheme);
    else missing.push({ scheme, contracts: absent });
  }
  const lines = missing.map(
    ({ scheme, contracts }) =>
      `${scheme} not offered on ${network}: no code at ${contracts.map((c) => `${c.name} ${c.address}`).join(", ")}`,
  );
  return { network, present, missing, lines };
};
