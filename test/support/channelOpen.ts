// A payer's batch-settlement channel with the service under test as receiver, opened directly on the run's devnet (as
// any facilitator would send the payer's deposit) and known to the service as an open channel row; and the official
// client that pays with it. Until the service sends deposits itself, tests open channels this way.
import type { SqlClient } from "@effect/sql"
import { x402Client } from "@x402/core/client"
import { toClientEvmSigner } from "@x402/evm"
import { BatchSettlementEvmScheme, computeChannelId, createBatchSettlementEIP3009DepositPayload } from "@x402/evm/batch-settlement/client"
import { wrapFetchWithPayment } from "@x402/fetch"
import { Effect } from "effect"
import { type Hex, keccak256, toHex } from "viem"
import type { PrivateKeyAccount } from "viem/accounts"
import { inject } from "vitest"
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS } from "../../layers/x402/channelContracts.js"
import { channelMachine } from "../../machines/channel.js"
import { startMachine, stepMachine } from "../../machines/step.js"
import { devAccount, publicClient, TREASURY, walletFor } from "./clients.js"
import { officialBatchSettlementAbi, officialErc3009CollectorData } from "./x402Official.js"

export const NETWORK = "eip155:84532" as const
/** The service's default withdrawal delay (CHANNEL_WITHDRAW_DELAY_SECONDS). */
export const WITHDRAW_DELAY = 86_400
/** The official client's salt when none is given. */
export const ZERO_SALT: Hex = `0x${"0".repeat(64)}`

export const channelConfigOf = (payer: PrivateKeyAccount, salt: Hex = ZERO_SALT, overrides: Partial<Record<"receiver" | "receiverAuthorizer", Hex>> = {}) => ({
  payer: payer.address,
  payerAuthorizer: payer.address,
  receiver: overrides.receiver ?? TREASURY,
  receiverAuthorizer: overrides.receiverAuthorizer ?? TREASURY,
  token: inject("usdcAddress"),
  withdrawDelay: WITHDRAW_DELAY,
  salt
})
export type TestChannelConfig = ReturnType<typeof channelConfigOf>

const requirementsFor = (config: TestChannelConfig) => ({
  scheme: "batch-settlement",
  network: NETWORK as `${string}:${string}`,
  amount: "1",
  asset: config.token,
  payTo: config.receiver,
  maxTimeoutSeconds: 300,
  extra: { receiverAuthorizer: config.receiverAuthorizer, withdrawDelay: config.withdrawDelay, name: "USDC", version: "2" }
})

/** Deposits `amount` into the payer's channel on chain (sent by a relayer) and records it with the service as open. */
export const openTestChannel = (sql: SqlClient.SqlClient, payer: PrivateKeyAccount, amount: bigint, salt: Hex = ZERO_SALT) =>
  Effect.flatMap(Effect.promise(() => depositOnChain(payer, amount, salt)), ({ config, channelId, hash }) => {
    const started = startMachine(channelMachine, {})
    const opened = stepMachine(channelMachine, started.persisted, { type: "DEPOSIT_INCLUDED", at: Date.now(), txHash: hash, balance: amount.toString() })
    return sql`INSERT INTO channels (id, network, payer, payer_authorizer, receiver, token, withdraw_delay, balance, status, machine_snapshot, salt, receiver_authorizer)
      VALUES (${channelId}, ${"base-sepolia"}, ${payer.address.toLowerCase()}, ${payer.address.toLowerCase()}, ${config.receiver.toLowerCase()},
              ${config.token.toLowerCase()}, ${config.withdrawDelay}, ${amount.toString()}, 'open', ${JSON.stringify(opened.persisted)}::jsonb,
              ${config.salt.toLowerCase()}, ${config.receiverAuthorizer.toLowerCase()})`.pipe(
      Effect.orDie,
      Effect.as({ config, channelId })
    )
  })

/** The payer's deposit sent on chain by a relayer, as a facilitator would. */
export const depositOnChain = async (payer: PrivateKeyAccount, amount: bigint, salt: Hex = ZERO_SALT) => {
  const config = channelConfigOf(payer, salt)
  const result = await createBatchSettlementEIP3009DepositPayload(payer, 2, requirementsFor(config), config, amount.toString(), "1")
  const deposit = result.payload as { deposit: { authorization: { erc3009Authorization?: { validAfter: string; validBefore: string; salt: Hex; signature: Hex } } } }
  const auth = deposit.deposit.authorization.erc3009Authorization
  if (auth === undefined) throw new Error("no ERC-3009 authorization")
  const relayer = walletFor(devAccount(7))
  const hash = await relayer.writeContract({
    address: BATCH_SETTLEMENT_ADDRESS,
    abi: officialBatchSettlementAbi,
    functionName: "deposit",
    args: [config, amount, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, officialErc3009CollectorData(auth.validAfter, auth.validBefore, auth.salt, auth.signature)]
  })
  const receipt = await publicClient().waitForTransactionReceipt({ hash })
  if (receipt.status !== "success") throw new Error(`deposit ${hash} reverted`)
  return { config, channelId: computeChannelId(config, NETWORK).toLowerCase(), hash }
}

/** `fetch` paying by channel with the unmodified official client (vouchers; it reads the channel's state from the chain). */
export const channelFetch = (payer: PrivateKeyAccount, options: { readonly salt?: Hex } = {}) => {
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(payer, publicClient()), { salt: options.salt ?? ZERO_SALT })
  const client = new x402Client()
    .register(NETWORK, scheme)
    .setSpendControls({ allowedAssets: [{ network: NETWORK, asset: inject("usdcAddress"), maxAmountPerPayment: "1000000" }] })
  return { fetch: wrapFetchWithPayment(fetch, client), scheme }
}

export const saltOf = (label: string): Hex => keccak256(toHex(label))
