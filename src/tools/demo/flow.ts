// The demo's story, against a running marketplace: two SDK agents register, a client finds the translator by a
// natural-language search and pays a chained call, the chain's tree shows each hop's cost, a verified webhook arrives,
// a dispute is filed and resolved, the translator's owner withdraws; then the money table, read back from the chain.
import { agentOwner, type ChainNode, marketplace, toMicro, webhooks, type WebhookEvent, fromMicro } from "@agent-marketplace/sdk"
import { createPublicClient, erc20Abi, http } from "viem"
import type { LocalAccount } from "viem"
import { serve, summariser, translator } from "./agents.js"

export interface DemoSetup {
  readonly baseUrl: string
  readonly rpcUrl: string
  readonly operatorToken: string
  readonly summariserOwner: LocalAccount
  readonly translatorOwner: LocalAccount
  readonly client: LocalAccount
  /** The devnet's earnings hold (DEVNET_HOLD_SECONDS), said out loud since real holds last hours. */
  readonly holdSeconds: number
  readonly log: (line: string) => void
}

export interface MoneyRow {
  readonly who: string
  readonly address: string
  /** What the service's own figures say moved (micro-USDC; + in, − out), and what the chain shows. */
  readonly expected: bigint
  readonly onChain: bigint
}

export interface DemoResult {
  readonly rows: ReadonlyArray<MoneyRow>
  readonly chainTotalCost: string
  readonly platformRevenue: bigint
  /** The treasury's chain balance − (ledger + in flight), micro-USDC. */
  readonly drift: bigint
  readonly treasuryOnChain: bigint
  /** Webhook events in the order they happened (their own timestamps: deliveries may arrive in another order). */
  readonly webhookEvents: ReadonlyArray<string>
  /** What the agents' owners can still withdraw, micro-USDC: the treasury holds it for them. */
  readonly owedToAgents: bigint
  /** Per agent: earned in total (85% of its price per call) and still available after withdrawals. */
  readonly earned: ReadonlyArray<readonly [string, string, string]>
  readonly withdrawalTx: string
}

const until = async <A>(what: string, read: () => Promise<A>, done: (a: A) => boolean, ms = 30_000): Promise<A> => {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms (last: ${JSON.stringify(value)})`)
    await new Promise((r) => setTimeout(r, 150))
  }
}

const operatorCall = async <A>(setup: DemoSetup, path: string, init: { method?: string; json?: unknown } = {}): Promise<A> => {
  const response = await fetch(`${setup.baseUrl}${path}`, {
    method: init.method ?? (init.json === undefined ? "GET" : "POST"),
    headers: { authorization: `Bearer ${setup.operatorToken}`, "x-operator": "demo operator", "content-type": "application/json" },
    ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) })
  })
  const body = (await response.json()) as { success: boolean; data: A; error?: unknown }
  if (!body.success) throw new Error(`${path}: ${JSON.stringify(body.error)}`)
  return body.data
}

/** Events by the time they happened (stable for equal timestamps). */
const inOrder = (events: ReadonlyArray<WebhookEvent>): Array<string> =>
  [...events].sort((a, b) => Date.parse(a.timestamp) - Date.parse(b.timestamp)).map((e) => e.event)

const tree = (node: ChainNode, indent = ""): Array<string> => [
  `${indent}${node.depth === 0 ? "●" : "└─"} ${node.capabilityId} by ${node.agentId.slice(0, 8)}… depth ${node.depth}, cost ${node.cost} USDC, ${node.status}`,
  ...node.children.flatMap((child) => tree(child, `${indent}   `))
]

export const runDemo = async (setup: DemoSetup): Promise<DemoResult> => {
  const { log } = setup
  const health = (await (await fetch(`${setup.baseUrl}/health`)).json()) as { data: { chain: { usdc: `0x${string}`; treasury: `0x${string}` } } }
  const { usdc, treasury } = health.data.chain
  const chain = createPublicClient({ transport: http(setup.rpcUrl), pollingInterval: 20 })
  const balance = (address: `0x${string}`) => chain.readContract({ address: usdc, abi: erc20Abi, functionName: "balanceOf", args: [address] })
  const parties = [
    ["client", setup.client.address],
    ["summariser's owner", setup.summariserOwner.address],
    ["translator's owner", setup.translatorOwner.address],
    ["treasury", treasury]
  ] as const
  const before = await Promise.all(parties.map(([, a]) => balance(a)))

  // 1. Two agents built with the SDK, served locally, registered (each pays its 0.10 fee from its own wallet).
  const summariserAgent = summariser(setup.baseUrl)
  const summariserOwner = agentOwner(summariserAgent, { wallet: setup.summariserOwner })
  const translatorAgent = translator(setup.baseUrl, () => summariserOwner.agentId ?? "")
  const translatorOwner = agentOwner(translatorAgent, { wallet: setup.translatorOwner })
  const servers = [await serve(summariserAgent.handler), await serve(translatorAgent.handler)] as const
  const received: Array<WebhookEvent> = []
  let secret = ""
  const hooks = await serve((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      try {
        received.push(webhooks.verify(Buffer.concat(chunks), req.headers, secret))
        res.writeHead(204).end()
      } catch (error) {
        log(`  webhook refused: ${String(error)}`)
        res.writeHead(400).end()
      }
    })
  })
  try {
    const s = await summariserOwner.register({ execution: servers[0].url })
    const t = await translatorOwner.register({ execution: servers[1].url })
    log(`registered Summariser ${s.id} and Translator ${t.id} (0.10 USDC each, paid with x402 from their wallets)`)
    log(`  holds are shortened on this devnet: earnings become available ${setup.holdSeconds} s after a call (DEVNET_HOLD_SECONDS);`)
    log("  on a real deployment a new agent's earnings are held 24 h, the window in which a client may dispute a call")
    await summariserOwner.enableChaining({ maxDepth: 2 })
    await translatorOwner.enableChaining({ maxDepth: 2 })
    secret = (await translatorOwner.subscribe(hooks.url, ["*"])).secret
    log("chaining on for both; the translator's owner subscribed a webhook receiver (verified with webhooks.verify)")

    // 2. A client finds the translator in plain words and pays a chained call.
    const market = marketplace({ baseUrl: setup.baseUrl, wallet: setup.client, maxPayment: "5.00" })
    const found = await market.search("translate english text into french")
    const target = found[0]
    if (target?.id !== t.id) throw new Error(`search did not rank the translator first: ${JSON.stringify(found.map((a) => a.name))}`)
    log(`search "translate english text into french" → ${target.name} (${found.length} result${found.length === 1 ? "" : "s"})`)
    const result = await market.execute<{ translation: string; summary: string }>(t.id, "translate", { text: "The cat sat on the mat. The dog slept." }, { budget: "2.00" })
    log(`paid a chain with a 2.00 USDC budget: "${result.output?.translation}" (chain ${result.chain?.status}, unspent ${result.chain?.refunded} on its way back)`)
    const txId = result.transactionId ?? ""
    const view = await until("the chain's refund", () => market.chain(txId), (c) => c.refund?.status === "confirmed")
    for (const line of tree(view.tree)) log(`  ${line}`)
    log(`  total ${view.totalCost} USDC over ${view.nodeCount} calls; refunded ${view.refund?.amount} on chain (${view.refund?.txHash?.slice(0, 12)}…)`)

    // 3. A verified webhook reaches the owner.
    await until("a verified webhook", async () => received.length, (n) => n > 0)
    log(`webhooks verified so far, in the order they happened: ${inOrder(received).join(", ")}`)

    // 4. A dispute, answered by the agent's owner and resolved by the platform.
    const dispute = await market.dispute(txId, "quality", "the translation dropped the second sentence")
    log(`the client disputes the chained call it just paid (transaction ${txId}): "the translation dropped the second sentence"`)
    log(`  dispute ${dispute.disputeId} is open; the agent's owner may answer until ${dispute.respondBy}, and the call's money stays in escrow meanwhile`)
    await translatorOwner.respondToDispute(dispute.disputeId, "the capability summarises before translating, as described")
    log(`  the translator's owner answers: "the capability summarises before translating, as described"`)
    const resolved = await operatorCall<{ status: string; client_refund: string | null }>(setup, `/api/v1/operator/disputes/${dispute.disputeId}/resolve`, { json: { resolution: "resolved_agent", notes: "works as described" } })
    log(`  an operator resolves it for the agent (${resolved.status}): the capability's description says it summarises first, so the`)
    log(`  output is what the client paid for; the client gets ${resolved.client_refund ?? "nothing"} back and the agents keep their earnings`)

    // 5. The translator's owner withdraws once the (devnet-short) hold has passed.
    const earned = await until("the translator's earnings available", () => translatorOwner.earnings(), (b) => toMicro(b.available) >= 1_000_000n, 45_000)
    log(`translator earnings: ${earned.available} available, ${earned.pending} held`)
    const withdrawal = await translatorOwner.withdraw("1.00")
    const paid = await translatorOwner.waitForWithdrawal(withdrawal.withdrawalId)
    if (paid.status !== "completed") throw new Error(`withdrawal ${paid.status}: ${JSON.stringify(paid)}`)
    log(`withdrew 1.00 (fee 0.10): 0.90 sent on chain to the owner's wallet, tx ${String(paid.tx_hash).slice(0, 12)}…`)
    await until("withdrawal.completed webhook", async () => received.map((e) => e.event), (es) => es.includes("withdrawal.completed"))

    // 6. The money table: what the service's figures say moved, against the chain.
    const cost = await market.chainCost(txId)
    const after = await Promise.all(parties.map(([, a]) => balance(a)))
    const registration = 100_000n
    const spent = toMicro(view.totalCost)
    const net = toMicro(withdrawal.netAmount)
    // Each agent's earnings once nothing is held any more (the devnet hold is short).
    const released = (b: { pending: string; totalEarned: string }) => b.pending === "0.000000" && b.totalEarned !== "0.000000"
    const earnings = {
      summariser: await until("the summariser's earnings released", () => summariserOwner.earnings(), released),
      translator: await until("the translator's earnings released", () => translatorOwner.earnings(), released)
    }
    const expected = [-spent, -registration, net - registration, 2n * registration + spent - net]
    const rows = parties.map(([who, address], i) => ({ who, address, expected: expected[i] ?? 0n, onChain: (after[i] ?? 0n) - (before[i] ?? 0n) }))
    const breakdown = cost["breakdown"] as { platformFees: string; platformCuts: string }
    const platformRevenue = 2n * registration + toMicro(breakdown.platformFees) + toMicro(breakdown.platformCuts) + 100_000n
    const reconciliation = await until("reconciliation at zero drift", () => operatorCall<{ current: { drift: string; chainBalance: string } }>(setup, "/api/v1/operator/treasury/reconciliation"), (r) => r.current.drift === "0")
    return {
      rows,
      chainTotalCost: view.totalCost,
      platformRevenue,
      drift: BigInt(reconciliation.current.drift),
      treasuryOnChain: BigInt(reconciliation.current.chainBalance),
      webhookEvents: inOrder(received),
      owedToAgents: toMicro(earnings.summariser.available) + toMicro(earnings.translator.available),
      earned: [
        ["Summariser", earnings.summariser.totalEarned, earnings.summariser.available],
        ["Translator", earnings.translator.totalEarned, earnings.translator.available]
      ],
      withdrawalTx: String(paid.tx_hash)
    }
  } finally {
    await Promise.all([...servers, hooks].map((s) => s.close()))
  }
}

/** The final table, for a terminal. */
export const moneyTable = (result: DemoResult): Array<string> => {
  const pad = (s: string, n: number) => s.padEnd(n)
  const amount = (m: bigint) => (m >= 0n ? `+${fromMicro(m)}` : fromMicro(m)).padStart(12)
  const sum = result.rows.reduce((total, r) => total + r.onChain, 0n)
  const treasury = result.rows.find((r) => r.who === "treasury")?.onChain ?? 0n
  return [
    "How each wallet's USDC moved during the demo. 'service says': what the service's own figures (call costs, fees,",
    "the withdrawal) say the wallet gained (+) or spent (-); 'on chain': the change of its balance read from the token.",
    "",
    `${pad("who", 22)}${"service says".padStart(12)}  ${"on chain".padStart(12)}`,
    ...result.rows.map((r) => `${pad(r.who, 22)}${amount(r.expected)}  ${amount(r.onChain)}${r.expected === r.onChain ? "  ✓" : "  ✗"}`),
    `${pad("sum ", 22)}${"".padStart(12)}  ${amount(sum)}   (${sum === 0n ? "zero: money only moved between these wallets" : "NOT zero"})`,
    "",
    ...result.earned.map(([agent, total, available]) => `${agent} earned ${total} USDC (85% of its price per call); ${available} left to withdraw`),
    `the treasury's ${fromMicro(treasury)} = platform revenue ${fromMicro(result.platformRevenue)} (2 registrations, per-call fees, 15% cuts,`,
    `  the withdrawal fee) + ${fromMicro(result.owedToAgents)} still owed to the agents' owners${treasury === result.platformRevenue + result.owedToAgents ? "  ✓" : "  ✗"}`,
    `treasury on chain ${fromMicro(result.treasuryOnChain)} USDC = the ledger's treasury; reconciliation drift ${fromMicro(result.drift)}`
  ]
}
