// The campaign's channel payers: wallets of their own (funded with USDC once, at the start), each paying through the
// balancer with the unmodified official batch-settlement client (@x402/fetch + @x402/evm): its first call deposits,
// later calls pay by voucher. One client per payer for the whole campaign, its calls one after the other (the client
// keeps the channel's state between them, as a real payer does); every answer is kept, like the exact load's.
import { createWalletClient, type Hex, http, keccak256, toHex } from "viem"
import { privateKeyToAccount } from "viem/accounts"
import { channelClient, type ChannelClient } from "../../test/support/channelClient.js"
import { DEV_PRIVATE_KEYS, DEVNET_USDC_ADDRESS } from "../../layers/devnet/anvil.js"
import { devnetChain } from "../../layers/devnet/accounts.js"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import { createPublicClient } from "viem"
import { at } from "../lib/params.js"
import type { CallResult } from "./load.js"

/** USDC each channel payer gets at the start: enough for its deposits over a long campaign. */
const FUNDING = 200_000_000n

export interface ChannelPayers {
  readonly addresses: ReadonlyArray<`0x${string}`>
  /** `calls` voucher-paid calls per payer, the payers at once. */
  readonly round: (balancer: string, agentId: string, calls: number, offset: number) => Promise<Array<CallResult>>
}

/** `count` payers with keys derived from the campaign's seed, funded from dev account 1. */
export const channelPayers = async (anvilUrl: string, count: number, seed: number): Promise<ChannelPayers> => {
  const accounts = Array.from({ length: count }, (_, i) => privateKeyToAccount(keccak256(toHex(`chaos channel payer ${seed} ${i}`))))
  const chain = devnetChain(anvilUrl)
  const publicClient = createPublicClient({ chain, transport: http(anvilUrl), pollingInterval: 20 })
  const funder = createWalletClient({ account: privateKeyToAccount(DEV_PRIVATE_KEYS[1]!), chain, transport: http(anvilUrl) })
  for (const account of accounts) {
    const hash = await funder.writeContract({ address: DEVNET_USDC_ADDRESS, abi: usdcAbi, functionName: "transfer", args: [account.address, FUNDING] })
    await publicClient.waitForTransactionReceipt({ hash })
  }
  const clients: ReadonlyArray<ChannelClient> = accounts.map((account) =>
    channelClient(account, { rpcUrl: anvilUrl, usdc: DEVNET_USDC_ADDRESS as Hex, salt: `chaos ${seed}`, depositCalls: 200 }))

  const one = async (client: ChannelClient, payer: `0x${string}`, balancer: string, agentId: string, n: number): Promise<CallResult> => {
    try {
      const answer = await client.fetch(`${balancer}/api/v1/execute`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: "by channel", n } }),
        signal: AbortSignal.timeout(90_000)
      })
      const body: unknown = await answer.json().catch(() => undefined)
      const requestId = at(body, "data", "requestId") ?? at(body, "error", "details", "requestId")
      const state = at(body, "data", "status")
      return { payer, status: answer.status, requestId: typeof requestId === "string" ? requestId : undefined, state: typeof state === "string" ? state : undefined }
    } catch {
      return { payer, status: 0, requestId: undefined, state: undefined }
    }
  }

  return {
    addresses: accounts.map((a) => a.address),
    round: async (balancer, agentId, calls, offset) => {
      const perPayer = await Promise.all(clients.map(async (client, i) => {
        const results: Array<CallResult> = []
        for (let k = 0; k < calls; k++) results.push(await one(client, accounts[i]!.address, balancer, agentId, offset + i * 1_000 + k))
        return results
      }))
      return perPayer.flat()
    }
  }
}
