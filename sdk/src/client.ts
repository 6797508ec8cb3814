// The client side: find agents, pay for calls with x402, follow them, read chains, dispute a bad result.
import { MarketplaceError } from "./errors.js"
import { type Fetch, joinUrl, request } from "./http.js"
import { channelScheme, type PayerOptions, payingFetch } from "./payments.js"
import { fromMicro } from "./money.js"
import { type ExecutionReceipt, receiptFromHeaders } from "./receipts.js"

export interface MarketplaceOptions extends Omit<PayerOptions, "baseUrl"> {
  /** The marketplace's base URL (default http://127.0.0.1:3000, the devnet's). */
  readonly baseUrl?: string
}

export type ExecutionStatus = "pending" | "completed" | "failed" | "timeout" | "refunded"

export interface Execution<O = Record<string, unknown>> {
  readonly requestId: string
  readonly status: ExecutionStatus
  readonly output?: O
  readonly executionTime: number | null
  readonly cost?: { readonly agentFee: string; readonly platformFee: string; readonly total?: string }
  readonly settlement?: { readonly status: string; readonly txHash: string | null }
  /** The transaction id (tx_…) a dispute names: on every paid answer (plain, metered, credit, chained). */
  readonly transactionId?: string
  readonly chain?: { readonly chainId: string; readonly depth: number; readonly remainingBudget: string; readonly status?: string; readonly refunded?: string }
  readonly error?: string
  readonly [key: string]: unknown
}

export interface ExecuteResult<O = Record<string, unknown>> extends Execution<O> {
  /** `X-PAYMENT-USED`: the payment's handle; reads the output again and authorises a retry. Keep it. */
  readonly paymentUsed: string | undefined
  /** `X-Client-Id`: files disputes about this payer's calls. A credential: keep it like a password. */
  readonly clientId: string | undefined
  /** The marketplace's signed receipt (check it with `verifyReceipt`); absent until the call completed and settled. */
  readonly receipt: ExecutionReceipt | undefined
  /** From the receipt, in USDC: what the call cost the payer (usage of a metered call plus the platform fee)... */
  readonly charged?: string
  /** ...and what went back of the authorised maximum (`charged + returned` = what the payment authorised). */
  readonly returned?: string
}

export interface ExecuteOptions {
  /** Start a chain with this budget in USDC (e.g. "1.00"): the payment is the whole budget, the unspent part comes back. */
  readonly budget?: string
  /** The same key again (same agent, capability, input) answers the first purchase, charged once. */
  readonly idempotencyKey?: string
  /** Answer at once with 202 and a requestId; follow it with `status` or `wait`. */
  readonly async?: boolean
  /** Have the result posted there when it is known. */
  readonly callbackUrl?: string
}

export interface ChainNode {
  readonly requestId: string
  readonly transactionId: string
  readonly agentId: string
  readonly capabilityId: string
  readonly depth: number
  readonly status: string
  readonly cost: string
  readonly children: ReadonlyArray<ChainNode>
  readonly [key: string]: unknown
}

export interface ChainView {
  readonly chainId: string
  readonly status: string
  readonly totalBudget: string
  readonly totalCost: string
  readonly nodeCount: number
  readonly maxDepthReached: number
  readonly refund: { readonly amount: string; readonly status: string; readonly txHash: string | null } | null
  readonly tree: ChainNode
  readonly [key: string]: unknown
}

export type DisputeReason = "quality" | "non_delivery" | "overcharge"

/** A dispute's public view (`GET /api/v1/disputes/:id`). */
export interface Dispute {
  readonly id: string
  readonly status: "open" | "escalated" | "resolved_agent" | "resolved_client" | "resolved_split"
  readonly transaction_id: string
  readonly amount: string
  readonly client_refund: string | null
  readonly [key: string]: unknown
}

/** The answer to filing a dispute. */
export interface DisputeOpened {
  readonly disputeId: string
  readonly transactionId: string
  readonly agentId: string
  readonly status: "open"
  /** ISO 8601: the agent answers by then, or the dispute is escalated. */
  readonly respondBy: string
}

export interface AgentSummary {
  readonly id: string
  readonly name: string
  readonly capabilities: ReadonlyArray<{ readonly id: string; readonly pricing: { readonly basePrice: string } } & Record<string, unknown>>
  readonly [key: string]: unknown
}

export type DiscoverFilters = Partial<Record<"q" | "tags" | "capability" | "maxPrice" | "minReputation" | "minHealth" | "chainable" | "limit" | "offset", string | number | boolean>>

const query = (params: Record<string, string | number | boolean | undefined>) => {
  const search = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined) search.set(k, String(v))
  const text = search.toString()
  return text === "" ? "" : `?${text}`
}

/**
 * A client of the marketplace paying from `wallet` with x402.
 *
 * @example
 * const market = marketplace({ wallet: privateKeyToAccount(KEY), baseUrl: "http://127.0.0.1:3000" })
 * const [agent] = await market.search("translate english to french")
 * const result = await market.execute(agent.id, "translate", { text: "hello", to: "fr" })
 */
export const marketplace = (options: MarketplaceOptions) => {
  const baseUrl = options.baseUrl ?? "http://127.0.0.1:3000"
  const url = (path: string) => joinUrl(baseUrl, path)
  const channel = channelScheme({ ...options, baseUrl })
  const pay: Fetch = payingFetch({ ...options, baseUrl }, channel)
  /** What execute returned, by request id and transaction id: the payment handle and the client id for later calls. */
  const receipts = new Map<string, { paymentUsed: string | undefined; clientId: string | undefined }>()

  return {
    /**
     * Natural-language search, best match first.
     * @example const agents = await market.search("summarise a long text")
     */
    search: async (text: string, opts: { limit?: number } = {}): Promise<ReadonlyArray<AgentSummary>> => {
      const { data } = await request<{ agents: ReadonlyArray<AgentSummary> }>(url(`/api/v1/discover/search${query({ query: text, limit: opts.limit })}`))
      return data.agents
    },

    /**
     * Agents matching filters (`q`, `tags`, `capability`, `maxPrice`, `minReputation`, `minHealth`, `chainable`, …).
     * @example const cheap = await market.discover({ capability: "summarize", maxPrice: "0.05" })
     */
    discover: async (filters: DiscoverFilters = {}): Promise<ReadonlyArray<AgentSummary>> => {
      const { data } = await request<{ agents: ReadonlyArray<AgentSummary> }>(url(`/api/v1/discover${query(filters)}`))
      return data.agents
    },

    /**
     * Pays for one call (the capability's price plus the platform's 0.001, or the whole `budget` of a chain) and
     * returns the result. Failures throw: ExecutionError (502/504), PaymentError (402), ValidationError, …
     * @example
     * const r = await market.execute(id, "summarize", { text }, { budget: "1.00" })
     * console.log(r.output, r.cost, r.chain)
     */
    execute: async <O = Record<string, unknown>>(agentId: string, capabilityId: string, input: Record<string, unknown>, opts: ExecuteOptions = {}): Promise<ExecuteResult<O>> => {
      const answer = await request<Execution<O>>(url(`/api/v1/execute${opts.async === true ? "?async=true" : ""}`), {
        fetch: pay,
        json: {
          targetAgentId: agentId,
          capabilityId,
          input,
          ...(opts.idempotencyKey === undefined ? {} : { idempotencyKey: opts.idempotencyKey }),
          ...(opts.callbackUrl === undefined ? {} : { callbackUrl: opts.callbackUrl })
        },
        headers: opts.budget === undefined ? {} : { "X-Chain-Budget": opts.budget }
      })
      const handles = { paymentUsed: answer.headers.get("x-payment-used") ?? undefined, clientId: answer.headers.get("x-client-id") ?? undefined }
      receipts.set(answer.data.requestId, handles)
      if (answer.data.transactionId !== undefined) receipts.set(answer.data.transactionId, handles)
      const receipt = receiptFromHeaders(answer.headers)
      return {
        ...answer.data,
        ...handles,
        receipt,
        ...(receipt === undefined ? {} : { charged: fromMicro(BigInt(receipt.charged)), returned: fromMicro(BigInt(receipt.returned)) })
      }
    },

    /**
     * The signed receipt of a completed call this client paid (or `payment`'s), as the paid answer carried it.
     * @example const r = await market.receipt(requestId); verifyReceipt(r, await fetchMarketplaceKey(baseUrl))
     */
    receipt: async (requestId: string, opts: { payment?: string } = {}): Promise<ExecutionReceipt> => {
      const payment = opts.payment ?? receipts.get(requestId)?.paymentUsed
      const { data } = await request<ExecutionReceipt>(url(`/api/v1/execute/${encodeURIComponent(requestId)}/receipt`), {
        headers: payment === undefined ? {} : { "X-PAYMENT": payment }
      })
      return data
    },

    /**
     * An execution's status; with the payment handle of a call made by this client (or `payment`), its output and cost.
     * @example const s = await market.status(requestId)
     */
    status: async <O = Record<string, unknown>>(requestId: string, opts: { payment?: string } = {}): Promise<Execution<O>> => {
      const payment = opts.payment ?? receipts.get(requestId)?.paymentUsed
      const { data } = await request<Execution<O>>(url(`/api/v1/execute/${encodeURIComponent(requestId)}`), {
        headers: payment === undefined ? {} : { "X-PAYMENT": payment }
      })
      return data
    },

    /**
     * Polls `status` until the execution is no longer pending (default: every 250 ms for up to 60 s).
     * @example const done = await market.wait((await market.execute(id, "summarize", { text }, { async: true })).requestId)
     */
    wait: async <O = Record<string, unknown>>(requestId: string, opts: { payment?: string; timeoutMs?: number; intervalMs?: number } = {}): Promise<Execution<O>> => {
      const deadline = Date.now() + (opts.timeoutMs ?? 60_000)
      const payment = opts.payment ?? receipts.get(requestId)?.paymentUsed
      for (;;) {
        const current = await request<Execution<O>>(url(`/api/v1/execute/${encodeURIComponent(requestId)}`), {
          headers: payment === undefined ? {} : { "X-PAYMENT": payment }
        }).then((a) => a.data)
        if (current.status !== "pending") return current
        if (Date.now() > deadline) throw new MarketplaceError("SDK_WAIT_TIMEOUT", `${requestId} still pending after ${opts.timeoutMs ?? 60_000} ms`, 0, { requestId })
        await new Promise((resolve) => setTimeout(resolve, opts.intervalMs ?? 250))
      }
    },

    /**
     * A chain's tree (each node's agent, depth and cost) by the root's transaction id or the chain id.
     * @example const { tree, totalCost } = await market.chain(result.transactionId!)
     */
    chain: async (id: string): Promise<ChainView> => (await request<ChainView>(url(`/api/v1/chains/${encodeURIComponent(id)}`))).data,

    /**
     * What a chain cost: totals, platform fees and cuts, per agent and per depth.
     * @example const { totalCost, breakdown } = await market.chainCost(result.transactionId!)
     */
    chainCost: async (id: string): Promise<Record<string, unknown> & { totalCost: string }> =>
      (await request<Record<string, unknown> & { totalCost: string }>(url(`/api/v1/chains/${encodeURIComponent(id)}/cost`))).data,

    /**
     * Disputes a call paid by this client within 24 hours (or give `clientId`, the `X-Client-Id` of its answer).
     * @example const d = await market.dispute(result.transactionId!, "quality", "the summary is empty")
     */
    dispute: async (transactionId: string, reason: DisputeReason, evidence?: string, opts: { clientId?: string } = {}): Promise<DisputeOpened> => {
      const clientId = opts.clientId ?? receipts.get(transactionId)?.clientId
      if (clientId === undefined) throw new MarketplaceError("SDK_CLIENT_ID_UNKNOWN", "no X-Client-Id known for this transaction: pass opts.clientId", 0, { transactionId })
      const { data } = await request<DisputeOpened>(url("/api/v1/disputes"), {
        json: { transactionId, reason, ...(evidence === undefined ? {} : { evidence }) },
        headers: { "X-Client-Id": clientId }
      })
      return data
    },

    /**
     * One dispute's public view (status, resolution, refund).
     * @example const { status, client_refund } = await market.disputeStatus(opened.disputeId)
     */
    disputeStatus: async (disputeId: string): Promise<Dispute> => (await request<Dispute>(url(`/api/v1/disputes/${encodeURIComponent(disputeId)}`))).data,

    /**
     * The `fetch` this client pays with, for any other paid route.
     * @example await market.fetch(`${baseUrl}/api/v1/agents`, { method: "POST", headers: { "content-type": "application/json" }, body })
     */
    fetch: pay,

    /**
     * With `channel`: gives back what is left in this client's payment channel (everything deposited and not charged),
     * in one transaction the marketplace sends; the next call deposits again. Without a channel it does nothing.
     * @example const { transaction } = (await market.closeChannel()) ?? {}
     */
    closeChannel: async (): Promise<{ readonly transaction: string; readonly refunded: string } | undefined> => {
      if (channel === undefined) return undefined
      try {
        const settled = await channel.refund(url("/api/v1/channels/refund"))
        return { transaction: settled.transaction, refunded: settled.amount ?? "" }
      } catch (cause) {
        throw new MarketplaceError("SDK_CHANNEL_REFUND_FAILED", `the channel's refund failed: ${String(cause)}`, 0)
      }
    }
  } as const
}

export type Marketplace = ReturnType<typeof marketplace>
