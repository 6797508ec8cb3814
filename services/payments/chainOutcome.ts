// What the chain says about one payment: the calldata that settles it (alone or in a batch), whether a mined receipt
// paid it, and, when our own transaction did not, who used its authorization (a front-runner included) or why it failed.
import { Clock, Effect, Option } from "effect"
import { encodeFunctionData, getAddress, type Hex, parseSignature, toEventSelector, type TransactionReceipt } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import { settlementBatcherAbi } from "../../layers/devnet/batcherAbi.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import type { RejectionReason, VerifiedPayment } from "../../layers/x402/payment.js"
import { settlesAsVrs, tokenSignatureOf } from "../../layers/x402/smartAccount.js"
import { authorizationPayment, balanceAt, type ChainReadError, headBlock, movedExactly } from "../treasury/chainReads.js"
import type { TxOutcome } from "../treasury/TreasuryWriter.js"

/** The outcome of trying to settle now. */
export type SettleOutcome =
  | { readonly _tag: "Settled"; readonly txHash: string; readonly block: bigint | null }
  | { readonly _tag: "Failed"; readonly reason: RejectionReason | "rpc_error"; readonly message: string }
  /** `unfunded`: the payer held less than the amount at the block looked at (sending it now could not pay). */
  | { readonly _tag: "Pending"; readonly message: string; readonly unfunded?: true }

/** A settlement attempt: its outcome, and the treasury transaction's own outcome to record with it. */
export interface Settlement {
  readonly outcome: SettleOutcome
  /** The treasury transaction to record with it, on `network` (its writer knows how deep that chain's finality is). */
  readonly tx: Option.Option<{ readonly id: string; readonly outcome: Exclude<TxOutcome, { _tag: "Pending" }>; readonly network?: string }>
}

export const pending = (message: string): Settlement => ({ outcome: { _tag: "Pending", message }, tx: Option.none() })

/** r, s, v of a 65-byte signature by slicing (viem's parser costs more than the rest of a batch item); others parsed. */
const splitSignature = (signature: Hex): { readonly r: Hex; readonly s: Hex; readonly v: number } => {
  if (signature.length === 132) {
    const v = Number.parseInt(signature.slice(130), 16)
    return { r: `0x${signature.slice(2, 66)}`, s: `0x${signature.slice(66, 130)}`, v: v < 27 ? v + 27 : v }
  }
  const { r, s, v, yParity } = parseSignature(signature)
  return { r, s, v: Number(v ?? BigInt(yParity + 27)) }
}

const authorizationArgs = (p: VerifiedPayment) => {
  const { r, s, v } = splitSignature(p.signature)
  return { from: getAddress(p.payer), to: getAddress(p.payTo), value: p.amount, validAfter: p.validAfter, validBefore: p.validBefore, nonce: p.nonce, v, r, s }
}

/**
 * One payment, one transaction: the token's transferWithAuthorization, with (v, r, s) for a 65-byte signature, else
 * (a smart account's signature; an ERC-6492 one unwrapped, its account deployed first) the bytes overload.
 */
export const singleCalldata = (p: VerifiedPayment): Hex => {
  if (!settlesAsVrs(p.signature)) {
    return encodeFunctionData({
      abi: usdcAbi,
      functionName: "transferWithAuthorization",
      args: [getAddress(p.payer), getAddress(p.payTo), p.amount, p.validAfter, p.validBefore, p.nonce, tokenSignatureOf(p.signature)]
    })
  }
  const a = authorizationArgs(p)
  return encodeFunctionData({
    abi: usdcAbi,
    functionName: "transferWithAuthorization",
    args: [a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, a.v, a.r, a.s]
  })
}

/** Many payments, one transaction: the SettlementBatcher's settle(token, authorizations); only `settlesAsVrs` ones. */
export const batchCalldata = (token: `0x${string}`, payments: ReadonlyArray<VerifiedPayment>): Hex =>
  encodeFunctionData({ abi: settlementBatcherAbi, functionName: "settle", args: [token, payments.map(authorizationArgs)] })

/**
 * Gas for a batch of `n`: the contract tries an item only while ITEM_GAS (120,000) and its reserve (≈ 132,000) are
 * left, so the limit covers that for every item (an item uses ≈ 40,000-60,000, and only gas used is paid). 200 items
 * stay under a 30M block.
 */
export const batchGas = (n: number): bigint => 80_000n + 135_000n * BigInt(n)

const TRANSFER = toEventSelector("Transfer(address,address,uint256)")
const AUTHORIZATION_USED = toEventSelector("AuthorizationUsed(address,bytes32)")
const AUTHORIZATION_SETTLED = toEventSelector("AuthorizationSettled(address,address,bytes32,uint256,bool)")

/** What a batch's reading needs of a receipt's log. */
export interface ReceiptLog {
  readonly address: string
  readonly topics: ReadonlyArray<Hex>
  readonly data: Hex
}

/** An indexed address topic as a lower-case address. */
const topicAddress = (topic: Hex | undefined) => (topic === undefined ? "" : `0x${topic.slice(26)}`.toLowerCase())

/** One EIP-3009 authorization looked for in a receipt: who authorised, to whom, its nonce and amount. */
export interface AuthorizationItem {
  readonly from: string
  readonly to: string
  readonly nonce: string
  readonly amount: bigint
}

/**
 * Which of `items` a mined transaction paid, by authorization (from, nonce), whatever their order: the batcher (when the
 * transaction went through one) reported the item ok, the token logged AuthorizationUsed for it, and a Transfer of
 * exactly its amount from `from` to `to` is in the receipt (each Transfer log counts for one item only). Logs are read
 * by their topics (a batch carries three per item; viem's generic decoder costs more than the rest of a payment's
 * settlement here). Settlements (payers to the treasury) and metered remainders (the treasury to payers) both ask it.
 */
export const authorizationsPaid = (
  token: string,
  batcher: string | undefined,
  receipt: { readonly status: TransactionReceipt["status"]; readonly logs: ReadonlyArray<ReceiptLog> },
  items: ReadonlyArray<AuthorizationItem>
): ReadonlyArray<boolean> => {
  if (receipt.status !== "success") return items.map(() => false)
  const tokenAddress = token.toLowerCase()
  const batcherAddress = batcher?.toLowerCase()
  const key = (from: string, nonce: string) => `${from.toLowerCase()}:${nonce.toLowerCase()}`
  const reportedOk = new Set<string>()
  const used = new Set<string>()
  const transfers = new Map<string, number>()
  for (const log of receipt.logs) {
    const [topic, t1, t2, t3] = log.topics
    const address = log.address.toLowerCase()
    if (address === batcherAddress && topic === AUTHORIZATION_SETTLED && t3 !== undefined && log.data.length === 130) {
      // data: index (uint256), ok (bool)
      if (topicAddress(t1) === tokenAddress && BigInt(`0x${log.data.slice(66)}`) === 1n) reportedOk.add(key(topicAddress(t2), t3))
    } else if (address === tokenAddress && topic === AUTHORIZATION_USED && t2 !== undefined) {
      used.add(key(topicAddress(t1), t2))
    } else if (address === tokenAddress && topic === TRANSFER && log.data.length === 66) {
      const t = `${topicAddress(t1)}:${topicAddress(t2)}:${BigInt(log.data)}`
      transfers.set(t, (transfers.get(t) ?? 0) + 1)
    }
  }
  return items.map((item) => {
    const k = key(item.from, item.nonce)
    const t = `${item.from.toLowerCase()}:${item.to.toLowerCase()}:${item.amount}`
    const left = transfers.get(t) ?? 0
    if ((batcherAddress !== undefined && !reportedOk.has(k)) || !used.has(k) || left === 0) return false
    transfers.set(t, left - 1)
    return true
  })
}

/** Which of `payments` (payers to the treasury) a mined batch paid (`authorizationsPaid`). */
export const paidInBatch = (
  chain: Pick<ChainShape, "usdc" | "treasury">,
  batcher: `0x${string}`,
  receipt: { readonly status: TransactionReceipt["status"]; readonly logs: ReadonlyArray<ReceiptLog> },
  payments: ReadonlyArray<Pick<VerifiedPayment, "payer" | "nonce" | "amount">>
): ReadonlyArray<boolean> =>
  authorizationsPaid(chain.usdc.address, batcher, receipt, payments.map((p) => ({ from: p.payer, to: chain.treasury, nonce: p.nonce, amount: p.amount })))

/**
 * What the chain says happened to an authorization whose own settlement did not confirm (reverted, dropped, a failed
 * batch item, or never sent): paid to the treasury by anyone (a front-runner included) is settled with that hash;
 * otherwise failed for good, or worth another try.
 *
 * Every read is at one block (the head when it starts): another process's settlement of the same authorization, or a
 * front-runner's, may be mined between two reads, and reads at two heights (unused at one, the payer's funds gone at
 * the next: spent by that very transfer) failed a payment whose money was in the treasury. A payer short of the amount
 * is not final either while the authorization is valid: money may come back to them (a refund) and any copy of it
 * (ours in flight, another process's, a front-runner's) may still land. It fails only once it expired unused.
 */
export const lookUp = (chain: ChainShape, p: VerifiedPayment, tx: Settlement["tx"]): Effect.Effect<Settlement, ChainReadError> =>
  Effect.gen(function* () {
    // The clock is read before the head: a block after the head is mined later, so (its timestamp following the clock)
    // an authorization expired by now can no longer be used in it.
    const now = BigInt(Math.floor((yield* Clock.currentTimeMillis) / 1000))
    const head = yield* headBlock(chain)
    const found = yield* authorizationPayment(chain, p.payer, p.nonce, chain.treasury, p.amount, head.number)
    if (Option.isSome(found.payment)) {
      return { outcome: { _tag: "Settled", txHash: found.payment.value.txHash, block: found.payment.value.block }, tx }
    }
    if (found.used) {
      return { outcome: { _tag: "Failed", reason: "payment_already_used", message: "the authorization was used without paying the treasury" }, tx }
    }
    const balance = yield* balanceAt(chain, p.payer, head.number)
    if (p.validBefore <= now || p.validBefore <= head.timestamp) {
      return balance < p.amount
        ? { outcome: { _tag: "Failed", reason: "insufficient_funds", message: "the payer no longer held the amount when the authorization expired" }, tx }
        : { outcome: { _tag: "Failed", reason: "invalid_exact_evm_payload_authorization_valid_before", message: "the authorization expired unsettled" }, tx }
    }
    if (balance < p.amount) {
      return { outcome: { _tag: "Pending", message: `the payer held less than the amount at block ${head.number}; held until it settles or expires`, unfunded: true }, tx }
    }
    return { outcome: { _tag: "Pending", message: "not settled yet; will try again" }, tx }
  })

/** Turns our single-payment transaction's outcome into the payment's. */
export const resolveSingle = (chain: ChainShape, p: VerifiedPayment, txId: string, outcome: TxOutcome): Effect.Effect<Settlement, ChainReadError> => {
  if (outcome._tag === "Pending") return Effect.succeed(pending("the settlement transaction is not mined yet"))
  const tx = Option.some({ id: txId, outcome, network: chain.network })
  if (outcome._tag === "Mined" && outcome.receipt.status === "success" && movedExactly(chain, outcome.receipt, p.payer, chain.treasury, p.amount)) {
    return Effect.succeed({ outcome: { _tag: "Settled", txHash: outcome.receipt.transactionHash, block: outcome.receipt.blockNumber }, tx })
  }
  return lookUp(chain, p, tx)
}

/**
 * Turns a batch's outcome into one payment's: paid by the batch is settled with its hash; anything else is looked up
 * per authorization. The batch transaction itself is recorded once, by whoever follows it, never per payment.
 */
export const resolveInBatch = (chain: ChainShape, p: VerifiedPayment, outcome: TxOutcome, paid: boolean): Effect.Effect<Settlement, ChainReadError> => {
  if (outcome._tag === "Pending") return Effect.succeed(pending("the settlement batch is not mined yet"))
  if (outcome._tag === "Mined" && paid) {
    return Effect.succeed({ outcome: { _tag: "Settled", txHash: outcome.receipt.transactionHash, block: outcome.receipt.blockNumber }, tx: Option.none() })
  }
  return lookUp(chain, p, Option.none())
}
