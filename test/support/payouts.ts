// Withdrawal authorizations for tests: the EIP-712 `Withdrawal` a registered wallet signs to pay another address
// (docs/withdrawals.md), with every part overridable so tests can break it.
import { randomBytes } from "node:crypto"
import { getAddress, type Hex } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { payoutTypes } from "../../services/withdrawals/PayoutAuthorization.js"
import { TREASURY } from "./clients.js"

export interface PayoutToSign {
  readonly agentId: string
  /** Micro-USDC. */
  readonly amount: bigint
  readonly destination: string
  readonly nonce?: Hex
  /** Unix seconds; default now + 120. */
  readonly deadline?: number
  readonly chainId?: number
  readonly verifyingContract?: `0x${string}`
}

/** The request body's `authorization` for `payout`, signed by `signer`. */
export const signPayout = async (signer: PrivateKeyAccount, payout: PayoutToSign) => {
  const nonce = payout.nonce ?? (`0x${randomBytes(32).toString("hex")}` as Hex)
  const deadline = payout.deadline ?? Math.floor(Date.now() / 1000) + 120
  const signature = await signer.signTypedData({
    domain: { name: "Agent Marketplace", version: "1", chainId: payout.chainId ?? 84532, verifyingContract: getAddress(payout.verifyingContract ?? TREASURY) },
    types: payoutTypes,
    primaryType: "Withdrawal",
    message: { agentId: payout.agentId, amount: payout.amount, destination: getAddress(payout.destination), nonce, deadline: BigInt(deadline) }
  })
  return { nonce, deadline, signature }
}
