// Batch-settlement channels on the run's devnet whose receiver is a given treasury, moved on chain with `@x402/evm`'s own
// client code (deposit authorization, vouchers) and ABI, and their rows written as the channel feature would hold them.
import { BATCH_SETTLEMENT_ADDRESS, BATCH_SETTLEMENT_DOMAIN, claimBatchTypes, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, isBatchSettlementDepositPayload } from "@x402/evm"
import { computeChannelId, createBatchSettlementEIP3009DepositPayload, signVoucher } from "@x402/evm/batch-settlement/client"
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { type Hex, keccak256, type PrivateKeyAccount, toHex } from "viem"
import { inject } from "vitest"
import { Accounts, Ledger } from "../../services/ledger/Ledger.js"
import { publicClient, walletFor } from "./clients.js"
import { officialBatchSettlementAbi, officialErc3009CollectorData } from "./x402Official.js"

export const CAIP2 = "eip155:84532"
export const WITHDRAW_DELAY = 900

export interface ChannelConfig {
  readonly payer: Hex
  readonly payerAuthorizer: Hex
  readonly receiver: Hex
  readonly receiverAuthorizer: Hex
  readonly token: Hex
  readonly withdrawDelay: number
  readonly salt: Hex
}

/** Channels from `payer` to `treasury`, claims signed by `authorizer`, transactions sent by `relayer`. */
export const channelsTo = (o: { readonly treasury: Hex; readonly payer: PrivateKeyAccount; readonly authorizer: PrivateKeyAccount; readonly relayer: PrivateKeyAccount }) => {
  const usdc: Hex = inject("usdcAddress")
  const client = publicClient()
  const mined = async (hash: Hex) => {
    const receipt = await client.waitForTransactionReceipt({ hash })
    if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`)
    return receipt
  }
  const send = async (from: PrivateKeyAccount, functionName: string, args: ReadonlyArray<unknown>) =>
    mined(await walletFor(from).writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName, args }))

  const configFor = (salt: string): ChannelConfig => ({
    payer: o.payer.address,
    payerAuthorizer: o.payer.address,
    receiver: o.treasury,
    receiverAuthorizer: o.authorizer.address,
    token: usdc,
    withdrawDelay: WITHDRAW_DELAY,
    salt: keccak256(toHex(salt))
  })
  const requirements = {
    scheme: "batch-settlement",
    network: CAIP2,
    amount: "100",
    asset: usdc,
    payTo: o.treasury,
    maxTimeoutSeconds: 3600,
    extra: { receiverAuthorizer: o.authorizer.address, withdrawDelay: WITHDRAW_DELAY, name: "USDC", version: "2" }
  } as const
  const idOf = (config: ChannelConfig) => computeChannelId(config, CAIP2).toLowerCase()

  /** The official client's deposit authorization, submitted as its facilitator does. */
  const open = async (salt: string, amount: bigint) => {
    const config = configFor(salt)
    const result = await createBatchSettlementEIP3009DepositPayload(o.payer, 2, requirements, config, amount.toString(), "100")
    if (!isBatchSettlementDepositPayload(result.payload)) throw new Error("not a deposit payload")
    const auth = result.payload.deposit.authorization.erc3009Authorization
    if (auth === undefined) throw new Error("no ERC-3009 authorization")
    const data = officialErc3009CollectorData(auth.validAfter, auth.validBefore, auth.salt, auth.signature)
    await send(o.relayer, "deposit", [config, amount, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, data])
    return { config, id: idOf(config) }
  }

  /** A claim of `totalClaimed` on the payer's voucher for `maxClaimable`, authorized by the receiver authorizer. */
  const claim = async (config: ChannelConfig, maxClaimable: bigint, totalClaimed: bigint) => {
    const voucher = await signVoucher(o.payer, computeChannelId(config, CAIP2), maxClaimable.toString(), CAIP2)
    const row = { voucher: { channel: config, maxClaimableAmount: maxClaimable }, signature: voucher.signature, totalClaimed }
    const signature = await o.authorizer.signTypedData({
      domain: { ...BATCH_SETTLEMENT_DOMAIN, chainId: await client.getChainId(), verifyingContract: BATCH_SETTLEMENT_ADDRESS },
      types: claimBatchTypes,
      primaryType: "ClaimBatch",
      message: { claims: [{ channelId: computeChannelId(config, CAIP2), maxClaimableAmount: maxClaimable, totalClaimed }] }
    })
    await send(o.relayer, "claimWithSignature", [[row], signature])
    return voucher.signature.toLowerCase()
  }

  const settle = () => send(o.relayer, "settle", [o.treasury, usdc])
  const initiateWithdraw = (config: ChannelConfig, amount: bigint) => send(o.payer, "initiateWithdraw", [config, amount])

  return { usdc, configFor, idOf, open, claim, settle, initiateWithdraw }
}

export interface ChannelRowFixture {
  readonly id: string
  readonly network: string
  readonly config: ChannelConfig
  readonly status: string
  readonly balance: bigint
  readonly charged: bigint
  readonly claimed: bigint
  readonly settled?: bigint
  /** What the contract's totalClaimed was last read as (default: everything claimed landed). */
  readonly claimedOnChain?: bigint
  /** The machine's context (withdrawRequestedAt, finalizableAt, lastError, claims). */
  readonly context?: Record<string, unknown>
  readonly createdAt?: Date
}

const SIGNATURE = `0x${"ab".repeat(65)}`

/**
 * The row as the channel feature holds it, with one charge row per micro-USDC step the test names (one charge of
 * `charged`, claimed up to `claimed`), and the charges' ledger posting (receivable debited, escrow credited).
 */
export const insertChannel = (sql: SqlClient.SqlClient, f: ChannelRowFixture) =>
  Effect.gen(function* () {
    const ledger = yield* Ledger
    const settled = f.settled ?? 0n
    const snapshot = { status: "active", value: f.status, context: { withdrawRequestedAt: null, finalizableAt: null, claims: 0, lastError: null, ...f.context } }
    yield* sql.withTransaction(Effect.gen(function* () {
      yield* sql`INSERT INTO channels (id, network, payer, payer_authorizer, receiver, token, withdraw_delay, balance, charged_cumulative,
                   claimed_cumulative, settled_cumulative, voucher_max_claimable, voucher_signature, status, machine_snapshot, created_at,
                   claimed_on_chain, finalizable_at)
        VALUES (${f.id}, ${f.network}, ${f.config.payer.toLowerCase()}, ${f.config.payerAuthorizer.toLowerCase()}, ${f.config.receiver.toLowerCase()},
                ${f.config.token.toLowerCase()}, ${f.config.withdrawDelay}, ${f.balance}, ${f.charged}, ${f.claimed}, ${settled},
                ${f.charged === 0n ? null : f.charged}, ${f.charged === 0n ? null : SIGNATURE}, ${f.status}, ${JSON.stringify(snapshot)}::jsonb,
                ${f.createdAt ?? new Date()}, ${f.claimedOnChain ?? f.claimed},
                ${typeof f.context?.["finalizableAt"] === "number" ? new Date(f.context["finalizableAt"]) : null})`
      if (f.claimed > 0n) {
        yield* sql`INSERT INTO channel_charges (request_id, channel_id, amount, cumulative_after, voucher_max_claimable, status)
          VALUES (${`req_${f.id.slice(2, 14)}_1`}, ${f.id}, ${f.claimed}, ${f.claimed}, ${f.charged}, 'claimed')`
      }
      if (f.charged > f.claimed) {
        yield* sql`INSERT INTO channel_charges (request_id, channel_id, amount, cumulative_after, voucher_max_claimable, status)
          VALUES (${`req_${f.id.slice(2, 14)}_2`}, ${f.id}, ${f.charged - f.claimed}, ${f.charged}, ${f.charged}, 'charged')`
      }
      yield* postReceivable(ledger, f.charged - settled)
    })).pipe(Effect.orDie)
  })

/** The charges' posting: `amount` into the channel receivable (negative: out of it, as a settle does). */
export const postReceivable = (ledger: Ledger, amount: bigint) =>
  amount === 0n
    ? Effect.void
    : ledger.transfer({
      kind: "channel_charge",
      movements: [amount > 0n ? { debit: Accounts.channelReceivable, credit: Accounts.escrow, amount } : { debit: Accounts.escrow, credit: Accounts.channelReceivable, amount: -amount }],
      memo: "test fixture"
    }).pipe(Effect.orDie)
