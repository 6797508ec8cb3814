/**
 * Places our x402 channel and upto contracts (contracts/*.sol, shipped compiled in channels/*.generated.ts) at the
 * canonical addresses of a local anvil with `anvil_setCode`. None of them has a constructor or immutables, so the
 * runtime code is all there is to place: it is what the shipped creation code returns when run (an `eth_call`
 * without `to`), which never loads solc. Storage at the addresses is kept.
 */
import { createPublicClient, createTestClient, type Hex, http } from "viem";
import { CHANNEL_CONTRACTS, type ChannelContract } from "./contracts.js";

export class ChannelDeployError extends Error {
  override readonly name = "ChannelDeployError";
}

export interface PlacedContract {
  readonly name: string;
  readonly address: Hex;
  /** `placed`: code written; `present`: our code was already there; `foreign`: other code there, left alone. */
  readonly outcome: "placed" | "present" | "foreign";
}

export interface PlaceOptions {
  /** Overwrite code that is not ours (the devnet: an older build of ours from a state file). Default false. */
  readonly replaceForeign?: boolean;
}

/** Places every contract whose address does not already hold our current runtime code. Anvil only (not checked here). */
export const placeChannelContracts = async (rpcUrl: string, options: PlaceOptions = {}): Promise<ReadonlyArray<PlacedContract>> => {
  const transport = http(rpcUrl);
  const publicClient = createPublicClient({ transport });
  const testClient = createTestClient({ mode: "anvil", transport });
  const placeOne = async (contract: ChannelContract): Promise<PlacedContract> => {
    const runtime = (await publicClient.call({ data: contract.spec.shipped.bytecode })).data;
    if (runtime === undefined || runtime === "0x") {
      throw new ChannelDeployError(`the shipped ${contract.name} returned no runtime code (npm run devnet:artifact)`);
    }
    const current = await publicClient.getCode({ address: contract.address });
    const base = { name: contract.name, address: contract.address };
    if (current !== undefined && current.toLowerCase() === runtime.toLowerCase()) return { ...base, outcome: "present" };
    if (current !== undefined && current !== "0x" && options.replaceForeign !== true) return { ...base, outcome: "foreign" };
    await testClient.setCode({ address: contract.address, bytecode: runtime });
    return { ...base, outcome: "placed" };
  };
  return Promise.all(CHANNEL_CONTRACTS.map(placeOne));
};

/** `anvil/1.7.1/...` for anvil; anything else (or no answer) is treated as a chain we must not touch. */
export const isAnvil = async (rpcUrl: string): Promise<{ readonly anvil: boolean; readonly client: string }> => {
  const client = await createPublicClient({ transport: http(rpcUrl, { timeout: 10_000 }) })
    .request({ method: "web3_clientVersion" })
    .then((v) => String(v))
    .catch(() => "unknown");
  return { anvil: client.toLowerCase().startsWith("anvil"), client };
};

/** `npm run deploy:channels`: refuses any chain that is not an anvil, then places the contracts there. */
export const deployChannels = async (
  rpcUrl: string,
  options: PlaceOptions & { readonly log?: (line: string) => void } = {},
): Promise<ReadonlyArray<PlacedContract>> => {
  const { anvil, client } = await isAnvil(rpcUrl);
  if (!anvil) {
    throw new ChannelDeployError(
      `${rpcUrl} is not an anvil (web3_clientVersion: ${client}); refusing to write code to it. ` +
        "On a public chain the official x402 contracts are already deployed at these addresses.",
    );
  }
  const placed = await placeChannelContracts(rpcUrl, options);
  for (const p of placed) options.log?.(`${p.name} ${p.address}: ${p.outcome}`);
  return placed;
};
