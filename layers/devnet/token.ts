/**
 * TestUSDC on the devnet: deployed by dev account 0 at nonce 0 (so at DEVNET_USDC_ADDRESS) and 10,000 USDC minted to
 * each of accounts 1..9, only when the chain (fresh, or restored from a state file) does not have them yet.
 */
import { createPublicClient, createWalletClient, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { accountAt, DEV_ACCOUNTS, DEVNET_CHAIN_ID, DEVNET_INITIAL_USDC, DEVNET_USDC_ADDRESS, devnetChain } from "./accounts.js";
import type { CompiledContract } from "./compile.js";
import { usdcAbi } from "./usdcAbi.js";

const POLL_MS = 20;

/** Where the token goes: the primary devnet's (nonce 0) or a second network's (chain id 1, nonce 1: another address). */
export interface TokenPlace {
  readonly chainId: number;
  readonly address: `0x${string}`;
  /** Account 0's nonce of the deployment; the nonces below it are zero-value self-transfers. */
  readonly nonce: number;
}

/** Deploys and mints what is missing; `getCompiled` is called only when the token must be deployed. */
export const ensureToken = async (
  rpcUrl: string,
  getCompiled: () => Promise<CompiledContract>,
  place: TokenPlace = { chainId: DEVNET_CHAIN_ID, address: DEVNET_USDC_ADDRESS, nonce: 0 },
): Promise<void> => {
  const DEVNET_USDC_ADDRESS = place.address;
  const chain = devnetChain(rpcUrl, place.chainId);
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
    if (deployerNonce > place.nonce) {
      throw new Error(
        `devnet state is inconsistent: account 0 has nonce ${deployerNonce} but there is no code at ` +
          `${DEVNET_USDC_ADDRESS} (TestUSDC must be its deployment at nonce ${place.nonce}). Delete the state file.`,
      );
    }
    for (let n = deployerNonce; n < place.nonce; n++) {
      await wallet.sendTransaction({ to: deployer.address, value: 0n, nonce: n, gas: 21_000n });
    }
    const { bytecode } = await getCompiled();
    // Explicit nonce and gas: no estimate round trips, and it cannot be confused by a stale nonce cache.
    const hash = await wallet.sendTransaction({ data: bytecode, nonce: place.nonce, gas: 3_000_000n });
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success" || receipt.contractAddress?.toLowerCase() !== DEVNET_USDC_ADDRESS.toLowerCase()) {
      throw new Error(`TestUSDC deployment failed (tx ${hash}, status ${receipt.status})`);
    }
    nextNonce = place.nonce + 1;
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
