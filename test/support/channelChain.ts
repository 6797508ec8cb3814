// A devnet of its own (the channel tests move the chain's clock) with x402's channel and upto contracts placed by its
// start, and the steps the official client and facilitator take, built with `@x402/evm`'s own code and ABIs.
import {
  BATCH_SETTLEMENT_ADDRESS,
  BATCH_SETTLEMENT_DOMAIN,
  claimBatchTypes,
  ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
  isBatchSettlementDepositPayload,
  refundTypes
} from "@x402/evm"
import { computeChannelId, createBatchSettlementEIP3009DepositPayload, signVoucher } from "@x402/evm/batch-settlement/client"
import {
  type Abi,
  type Account,
  createPublicClient,
  createTestClient,
  createWalletClient,
  type Hex,
  http,
  keccak256,
  type PrivateKeyAccount,
  toHex,
  type TransactionReceipt
} from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { type Devnet, startDevnet } from "../../layers/devnet/anvil.js"
import { CHANNEL_CONTRACTS } from "../../layers/devnet/channels/contracts.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { officialBatchSettlementAbi, officialErc3009CollectorData } from "./x402Official.js"

export const NETWORK = "eip155:84532"
export const WITHDRAW_DELAY = 900

/** Our compiled ABI of one placed contract (it declares the custom errors, so reverts decode by name). */
export const oursAbi = (name: string): Abi => {
  const found = CHANNEL_CONTRACTS.find((c) => c.name === name)
  if (found === undefined) throw new Error(`no contract ${name}`)
  return found.spec.shipped.abi
}

export interface ChannelConfig {
  readonly payer: Hex
  readonly payerAuthorizer: Hex
  readonly receiver: Hex
  readonly receiverAuthorizer: Hex
  readonly token: Hex
  readonly withdrawDelay: number
  readonly salt: Hex
}

export interface VoucherClaim {
  readonly voucher: { readonly channel: ChannelConfig; readonly maxClaimableAmount: bigint }
  readonly signature: Hex
  readonly totalClaimed: bigint
}

/** The `n` bigints of a tuple result (the official ABI is not `as const`, so results arrive untyped). */
export const bigints = (result: unknown, n: number): ReadonlyArray<bigint> => {
  const values = Array.isArray(result) ? result : [result]
  const out = values.map((v: unknown) => (typeof v === "bigint" ? v : typeof v === "number" ? BigInt(v) : undefined))
  if (out.length !== n || out.some((v) => v === undefined)) throw new Error(`expected ${n} integers, got ${String(result)}`)
  return out.filter((v): v is bigint => v !== undefined)
}

export const startChannelChain = async () => {
  const devnet: Devnet = await startDevnet({ port: 0 })
  const chain = devnetChain(devnet.rpcUrl)
  const transport = http(devnet.rpcUrl)
  const publicClient = createPublicClient({ chain, transport, pollingInterval: 20 })
  const testClient = createTestClient({ mode: "anvil", chain, transport })
  const account = (index: number): PrivateKeyAccount => {
    const dev = devnet.accounts[index]
    if (dev === undefined) throw new Error(`no dev account ${index}`)
    return privateKeyToAccount(dev.privateKey)
  }
  const walletOf = (signer: Account) => createWalletClient({ account: signer, chain, transport, pollingInterval: 20 })
  const usdc = devnet.usdcAddress
  const payer = account(1)
  const receiverAuthorizer = account(2)
  const relayer = account(3)
  const receiver = account(4)

  const mined = async (hash: Hex): Promise<TransactionReceipt> => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash })
    if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`)
    return receipt
  }
  const usdcBalance = (address: Hex) => publicClient.readContract({ address: usdc, abi: usdcAbi, functionName: "balanceOf", args: [address] })

  const configFor = (salt: string): ChannelConfig => ({
    payer: payer.address,
    payerAuthorizer: payer.address,
    receiver: receiver.address,
    receiverAuthorizer: receiverAuthorizer.address,
    token: usdc,
    withdrawDelay: WITHDRAW_DELAY,
    salt: keccak256(toHex(salt))
  })

  const requirements = {
    scheme: "batch-settlement",
    network: NETWORK,
    amount: "100",
    asset: usdc,
    payTo: receiver.address,
    maxTimeoutSeconds: 3600,
    extra: { receiverAuthorizer: receiverAuthorizer.address, withdrawDelay: WITHDRAW_DELAY, name: "USDC", version: "2" }
  } as const

  /** The official client's deposit payload (ReceiveWithAuthorization to the ERC-3009 collector + first voucher). */
  const depositPayload = async (config: ChannelConfig, amount: bigint) => {
    const result = await createBatchSettlementEIP3009DepositPayload(payer, 2, requirements, config, amount.toString(), "100")
    if (!isBatchSettlementDepositPayload(result.payload)) throw new Error("not a deposit payload")
    const auth = result.payload.deposit.authorization.erc3009Authorization
    if (auth === undefined) throw new Error("no ERC-3009 authorization")
    return { payload: result.payload, collectorData: officialErc3009CollectorData(auth.validAfter, auth.validBefore, auth.salt, auth.signature) }
  }

  /** What the official facilitator sends for a deposit: `deposit(config, amount, collector, collectorData)`. */
  const deposit = async (config: ChannelConfig, amount: bigint, collectorData: Hex) =>
    mined(
      await walletOf(relayer).writeContract({
        address: BATCH_SETTLEMENT_ADDRESS,
        abi: officialBatchSettlementAbi,
        functionName: "deposit",
        args: [config, amount, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, collectorData]
      })
    )

  const openChannel = async (salt: string, amount: bigint) => {
    const config = configFor(salt)
    const { collectorData } = await depositPayload(config, amount)
    return { config, channelId: computeChannelId(config, NETWORK), receipt: await deposit(config, amount, collectorData) }
  }

  /** A claim row on the payer's voucher (signed by the official client) for `maxClaimable`. */
  const claimRow = async (config: ChannelConfig, maxClaimable: bigint, totalClaimed: bigint, voucherSigner: PrivateKeyAccount = payer): Promise<VoucherClaim> => {
    const voucher = await signVoucher(voucherSigner, computeChannelId(config, NETWORK), maxClaimable.toString(), NETWORK)
    return { voucher: { channel: config, maxClaimableAmount: maxClaimable }, signature: voucher.signature, totalClaimed }
  }

  const domain = { ...BATCH_SETTLEMENT_DOMAIN, chainId: devnet.chainId, verifyingContract: BATCH_SETTLEMENT_ADDRESS }
  const signClaims = (claims: ReadonlyArray<VoucherClaim>, signer: PrivateKeyAccount = receiverAuthorizer) =>
    signer.signTypedData({
      domain,
      types: claimBatchTypes,
      primaryType: "ClaimBatch",
      message: {
        claims: claims.map((c) => ({ channelId: computeChannelId(c.voucher.channel, NETWORK), maxClaimableAmount: c.voucher.maxClaimableAmount, totalClaimed: c.totalClaimed }))
      }
    })
  const signRefund = (channelId: Hex, nonce: bigint, amount: bigint, signer: PrivateKeyAccount = receiverAuthorizer) =>
    signer.signTypedData({ domain, types: refundTypes, primaryType: "Refund", message: { channelId, nonce, amount } })

  /** A view of x402BatchSettlement through the official ABI. */
  const read = (functionName: string, args: ReadonlyArray<unknown>): Promise<unknown> =>
    publicClient.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName, args })

  const channelState = async (channelId: Hex) => {
    const [balance, totalClaimed] = bigints(await read("channels", [channelId]), 2)
    return { balance, totalClaimed }
  }

  return {
    devnet, publicClient, testClient, walletOf, usdc, payer, receiverAuthorizer, relayer, receiver,
    mined, usdcBalance, read, configFor, requirements, depositPayload, deposit, openChannel, claimRow, signClaims, signRefund, channelState
  }
}

export type ChannelChain = Awaited<ReturnType<typeof startChannelChain>>
