// The agent owner's side: register the agent (paying the 0.10 USDC fee from its wallet with x402), turn chaining on,
// read earnings and history, withdraw, subscribe to webhooks and answer disputes; every owner request is signed with
// the wallet (`service-auth:{agentId}:{timestampMs}`).
import type { Agent } from "./agent.js"
import { MarketplaceError } from "./errors.js"
import { joinUrl, request } from "./http.js"
import { type PayerOptions, payingFetch, type Wallet } from "./payments.js"
import { walletAuthHeaders } from "./walletAuth.js"

export interface Balance {
  readonly agentId: string
  /** Withdrawable now. */
  readonly available: string
  /** Earned but still held (by trust tier: 24 h for a new agent, 1 h trusted, none premium). */
  readonly pending: string
  readonly totalEarned: string
  readonly totalWithdrawn: string
  readonly totalDisputed: string
  readonly executionCount: number
  readonly escrow: { readonly pendingCount: number; readonly pendingTotal: string }
}

/** A withdrawal as accepted (`POST /api/v1/payments/withdraw`, 202). */
export interface WithdrawAccepted {
  readonly withdrawalId: string
  readonly agentId: string
  readonly amount: string
  readonly fee: string
  /** What reaches the wallet: amount − fee. */
  readonly netAmount: string
  readonly destinationWallet: string
  readonly status: "pending"
}

/** A withdrawal's view (`GET /api/v1/payments/withdrawal/:id`). */
export interface Withdrawal {
  readonly id: string
  readonly agent_id: string
  readonly amount: string
  readonly fee: string
  readonly net_amount: string
  readonly destination_wallet: string
  readonly status: "pending" | "processing" | "completed" | "failed"
  readonly tx_hash: string | null
  readonly created_at: string
  readonly completed_at: string | null
}

/** One of the agent's transactions (the list view). */
export interface HistoryItem {
  readonly id: string
  /** The agent that hired this one inside a chain; null when a client paid. */
  readonly requesting_agent: string | null
  readonly providing_agent: string
  readonly capability_id: string
  readonly amount: string
  readonly platformCut: string
  readonly agent_earnings: string
  readonly status: string
  readonly execution_time: number | null
  readonly escrow_id: string
  readonly created_at: string
}

export interface OwnerOptions extends Omit<PayerOptions, "baseUrl" | "wallet"> {
  readonly wallet: Wallet
  /** Set when the agent is already registered (e.g. after a restart); `register` sets it otherwise. */
  readonly agentId?: string
}

/**
 * The owner's handle on an agent built with `createAgent`, signing with `wallet` (the agent's wallet).
 *
 * @example
 * const owner = agentOwner(agent, { wallet: privateKeyToAccount(KEY) })
 * await owner.register({ execution: "https://my-agent.example/execute" })
 * console.log(await owner.earnings())
 */
export const agentOwner = (agent: Pick<Agent, "definition" | "capabilities">, options: OwnerOptions) => {
  const baseUrl = agent.definition.marketplaceUrl
  const url = (path: string) => joinUrl(baseUrl, path)
  const { wallet } = options
  let agentId = options.agentId
  const id = () => {
    if (agentId === undefined) throw new MarketplaceError("SDK_NOT_REGISTERED", "register the agent first (or pass agentId)", 0)
    return agentId
  }
  const signed = async () => walletAuthHeaders(wallet, id())

  return {
    /** The agent's id once registered (or as given in the options). */
    get agentId() {
      return agentId
    },

    /**
     * Registers the agent at `endpoints.execution` (the URL serving `agent.handler`), paying the 0.10 USDC fee from
     * the agent's wallet (paying is the proof that you control it).
     * @example const { id } = await owner.register({ execution: "http://127.0.0.1:4000/" })
     */
    register: async (endpoints: { execution: string; health?: string }, extra: { metadata?: Record<string, unknown> } = {}) => {
      const pay = payingFetch({ ...options, baseUrl, wallet, maxPayment: options.maxPayment ?? "0.10" })
      const { data } = await request<{ id: string; wallet: string; name: string; status: string; registrationTxId?: string }>(url("/api/v1/agents"), {
        fetch: pay,
        json: {
          wallet: wallet.address,
          name: agent.definition.name,
          ...(agent.definition.description === undefined ? {} : { description: agent.definition.description }),
          ...(agent.definition.tags === undefined ? {} : { tags: agent.definition.tags }),
          capabilities: agent.capabilities,
          endpoints,
          ...(extra.metadata === undefined ? {} : { metadata: extra.metadata })
        }
      })
      agentId = data.id
      return data
    },

    /**
     * Lets other agents hire this one inside chains (and this one receive chain tokens), up to `maxDepth` levels.
     * @example await owner.enableChaining({ maxDepth: 3 })
     */
    enableChaining: async (settings: { maxDepth?: number; allowedCallers?: ReadonlyArray<string>; blockedCallers?: ReadonlyArray<string> } = {}) => {
      const { data } = await request<Record<string, unknown>>(url(`/api/v1/agents/${id()}`), {
        method: "PATCH",
        headers: await signed(),
        json: {
          chainSettings: {
            chain_enabled: true,
            chain_max_depth: settings.maxDepth ?? 3,
            chain_allowed_callers: settings.allowedCallers ?? [],
            chain_blocked_callers: settings.blockedCallers ?? []
          }
        }
      })
      return data
    },

    /**
     * Earnings: available (withdrawable), pending (held), totals.
     * @example const { available } = await owner.earnings()
     */
    earnings: async (): Promise<Balance> => (await request<Balance>(url(`/api/v1/payments/balance/${id()}`), { headers: await signed() })).data,

    /**
     * Withdraws `amount` USDC (minimum 1.00; a 0.10 fee is taken from it) to the agent's wallet, paid on chain.
     * Returns the withdrawal as accepted; `waitForWithdrawal` follows it to `completed`.
     * @example const { withdrawalId } = await owner.withdraw("1.50")
     */
    withdraw: async (amount: string): Promise<WithdrawAccepted> =>
      (await request<WithdrawAccepted>(url("/api/v1/payments/withdraw"), { headers: await signed(), json: { agentId: id(), amount } })).data,

    /**
     * One withdrawal (status `pending`, `processing`, `completed` with its `tx_hash`, or `failed`).
     * @example const { status, tx_hash } = await owner.withdrawal(withdrawalId)
     */
    withdrawal: async (withdrawalId: string): Promise<Withdrawal> =>
      (await request<Withdrawal>(url(`/api/v1/payments/withdrawal/${encodeURIComponent(withdrawalId)}`), { headers: await signed() })).data,

    /**
     * Polls a withdrawal until it is completed or failed (default up to 60 s).
     * @example const done = await owner.waitForWithdrawal((await owner.withdraw("1.00")).withdrawalId)
     */
    waitForWithdrawal: async (withdrawalId: string, opts: { timeoutMs?: number } = {}): Promise<Withdrawal> => {
      const deadline = Date.now() + (opts.timeoutMs ?? 60_000)
      for (;;) {
        const w = (await request<Withdrawal>(url(`/api/v1/payments/withdrawal/${encodeURIComponent(withdrawalId)}`), { headers: await signed() })).data
        if (w.status === "completed" || w.status === "failed") return w
        if (Date.now() > deadline) throw new MarketplaceError("SDK_WAIT_TIMEOUT", `withdrawal ${withdrawalId} still ${w.status}`, 0, w)
        await new Promise((resolve) => setTimeout(resolve, 250))
      }
    },

    /**
     * The agent's transactions, newest first (`limit` 1-100, default 20).
     * @example const transactions = await owner.history({ limit: 50 })
     */
    history: async (page: { limit?: number; offset?: number } = {}) => {
      const q = new URLSearchParams()
      if (page.limit !== undefined) q.set("limit", String(page.limit))
      if (page.offset !== undefined) q.set("offset", String(page.offset))
      const suffix = q.size === 0 ? "" : `?${q.toString()}`
      return (await request<ReadonlyArray<HistoryItem>>(url(`/api/v1/payments/history/${id()}${suffix}`), { headers: await signed() })).data
    },

    /**
     * Subscribes `url` to this agent's events ("*" or e.g. "execution.*"); the `secret` (whsec_…) is shown once: keep it
     * for `webhooks.verify`.
     * @example const { secret } = await owner.subscribe("https://me.example/hooks", ["*"])
     */
    subscribe: async (hookUrl: string, events: ReadonlyArray<string> = ["*"]) =>
      (await request<{ id: string; secret: string; url: string; events: ReadonlyArray<string> }>(url("/api/v1/webhooks"), {
        headers: await signed(),
        json: { agentId: id(), url: hookUrl, events }
      })).data,

    /**
     * Answers a dispute about one of this agent's calls (within 48 hours, else it is escalated).
     * @example await owner.respondToDispute(disputeId, "the output matched the request")
     */
    respondToDispute: async (disputeId: string, response: string) =>
      (await request<Record<string, unknown>>(url(`/api/v1/disputes/${encodeURIComponent(disputeId)}/respond`), { headers: await signed(), json: { response } })).data
  }
}

export type AgentOwner = ReturnType<typeof agentOwner>
