/**
 * The SettlementBatcher on the devnet: deployed by its own deployer key at nonce 0 (so at a fixed address, whatever
 * the treasury's nonce), only when the chain (fresh, or restored from a state file) does not have it yet.
 */
import { createPublicClient, createTestClient, createWalletClient, getContractAddress, type Hex, http, keccak256, parseEther, toBytes } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { devnetChain } from "./accounts.js";
import type { CompiledContract } from "./compile.js";

/** A devnet-only key (never holds anything but the gas anvil gives it): the batcher's deployer. */
const DEPLOYER_KEY: Hex = keccak256(toBytes("agent-marketplace devnet: SettlementBatcher deployer"));
const deployer = privateKeyToAccount(DEPLOYER_KEY);

/** Where the devnet's SettlementBatcher lives: its deployer's first deployment. */
export const DEVNET_SETTLEMENT_BATCHER_ADDRESS: `0x${string}` = getContractAddress({ from: deployer.address, nonce: 0n });
const DEVNET_BATCHER_AT_0 = DEVNET_SETTLEMENT_BATCHER_ADDRESS;

const POLL_MS = 20;

/** The second devnet network's batcher: the same deployer's deployment at nonce 1 (another address, as on two real chains). */
export const DEVNET_SECOND_SETTLEMENT_BATCHER_ADDRESS: `0x${string}` = getContractAddress({ from: deployer.address, nonce: 1n });

/** Deploys the batcher when it is missing; `getCompiled` is called only then. `at`: the deployer's nonce (0, or 1 on a second network). */
export const ensureBatcher = async (rpcUrl: string, getCompiled: () => Promise<CompiledContract>, at: { readonly chainId?: number; readonly nonce: number } = { nonce: 0 }): Promise<void> => {
  const DEVNET_SETTLEMENT_BATCHER_ADDRESS = at.nonce === 0 ? DEVNET_BATCHER_AT_0 : getContractAddress({ from: deployer.address, nonce: BigInt(at.nonce) });
  const chain = devnetChain(rpcUrl, at.chainId);
  const transport = http(rpcUrl);
  const publicClient = createPublicClient({ chain, transport, pollingInterval: POLL_MS });
  const code = await publicClient.getCode({ address: DEVNET_SETTLEMENT_BATCHER_ADDRESS });
  if (code !== undefined && code !== "0x") return;
  const nonce = await publicClient.getTransactionCount({ address: deployer.address, blockTag: "pending" });
  if (nonce > at.nonce) {
    throw new Error(
      `devnet state is inconsistent: the batcher's deployer has nonce ${nonce} but there is no code at ` +
        `${DEVNET_SETTLEMENT_BATCHER_ADDRESS}. Delete the state file.`,
    );
  }
  // Devnet only: anvil funds the deployer for its one transaction (no dev account's nonce moves).
  await createTestClient({ mode: "anvil", chain, transport }).setBalance({ address: deployer.address, value: parseEther("1") });
  const wallet = createWalletClient({ account: deployer, chain, transport, pollingInterval: POLL_MS });
  for (let n = nonce; n < at.nonce; n++) await wallet.sendTransaction({ to: deployer.address, value: 0n, nonce: n, gas: 21_000n });
  const { bytecode } = await getCompiled();
  const hash = await wallet.sendTransaction({ data: bytecode, nonce: at.nonce, gas: 1_000_000n });
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success" || receipt.contractAddress?.toLowerCase() !== DEVNET_SETTLEMENT_BATCHER_ADDRESS.toLowerCase()) {
    throw new Error(`SettlementBatcher deployment failed (tx ${hash}, status ${receipt.status})`);
  }
};
