// Layer composition: infrastructure, domain services, workers and the HTTP server, shared by main and the tests.
import { HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Config, Effect, Layer, Option, Redacted } from "effect"
import { createServer } from "node:http"
import { Chain, ChainLive } from "../layers/Chain.js"
import { Leases } from "../layers/cluster/Leases.js"
import { Networks, NetworksLive } from "../layers/Networks.js"
import { ChainIdentityLive } from "../layers/chainIdentity.js"
import { AppConfig } from "../layers/Config.js"
import { PaymentVerifier } from "../layers/PaymentVerifier.js"
import { DatabaseInfo, PgLive } from "../layers/Pg.js"
import { LoggingLive, LogSettings } from "../layers/observability/Logging.js"
import { withTransitionMetrics } from "../layers/observability/machines.js"
import { TracingLive } from "../layers/observability/Tracing.js"
import { AgentProxy } from "../layers/AgentProxy.js"
import { MachineHost, TimersWorkerLive } from "../machines/Host.js"
import { AgentRegistration } from "../services/agents/Registration.js"
import { Agents } from "../services/agents/Agents.js"
import { Balances } from "../services/ledger/Balances.js"
import { Chains } from "../services/chains/Chains.js"
import { ChainCalls } from "../services/chains/Children.js"
import { ChainBudgetReturnsLive } from "../services/chains/Repo.js"
import { ChainRoots } from "../services/chains/Root.js"
import { SpendingLimits } from "../services/limits/SpendingLimits.js"
import { Credits } from "../services/remainders/Credits.js"
import { Remainders } from "../services/remainders/Remainders.js"
import { ChainMachine } from "../services/chains/chainSpec.js"
import { ChannelMachine } from "../services/channels/channelSpec.js"
import { Deposits } from "../services/channels/Deposits.js"
import { ChannelClaims } from "../services/channels/Claims.js"
import { ChannelClaimsWorkerLive } from "../services/channels/ClaimsWorker.js"
import { ChannelRefunds } from "../services/channels/Refunds.js"
import { ChannelRefundRequests } from "../services/channels/RefundRequests.js"
import { ChannelTerms } from "../services/channels/Terms.js"
import { WithdrawWatch } from "../services/channels/WithdrawWatch.js"
import { CircuitMachine } from "../services/circuits/circuitSpec.js"
import { DisputeMachine } from "../services/disputes/disputeSpec.js"
import { ClientIds } from "../services/disputes/ClientIds.js"
import { Disputes } from "../services/disputes/Disputes.js"
import { DeliveryMachine } from "../services/webhooks/deliverySpec.js"
import { Dispatcher, WebhooksWorkerLive } from "../services/webhooks/Dispatcher.js"
import { DeliveryLog } from "../services/webhooks/DeliveryLog.js"
import { Subscriptions } from "../services/webhooks/Subscriptions.js"
import { Circuits } from "../services/circuits/Circuits.js"
import { Discovery } from "../services/discovery/Discovery.js"
import { DiscoveryResources } from "../services/discovery/Resources.js"
import { Analytics } from "../services/analytics/Analytics.js"
import { ReputationBoard } from "../services/reputation/Board.js"
import { ExecutionMachine } from "../services/executions/executionSpec.js"
import { Receipts } from "../services/executions/Receipts.js"
import { Executions } from "../services/executions/Executions.js"
import { Ledger } from "../services/ledger/Ledger.js"
import { Payments, PaymentsRecoveryLive } from "../services/payments/Payments.js"
import { UptoRecoveryLive, UptoSettlements } from "../services/payments/UptoSettlements.js"
import { UptoTerms } from "../services/payments/UptoTerms.js"
import { Paywall } from "../services/payments/Paywall.js"
import { SettlementMachine } from "../services/payments/settlementSpec.js"
import { RateLimitPruneLive, RateLimits } from "../services/executions/RateLimits.js"
import { UsedSignaturesPruneLive } from "../services/agents/WalletAuth.js"
import { WithdrawalMachine } from "../services/withdrawals/withdrawalSpec.js"
import { Withdrawals } from "../services/withdrawals/Withdrawals.js"
import { History } from "../services/ledger/History.js"
import { Refunds } from "../services/refunds/Refunds.js"
import { HealthProbesLive, Reputation } from "../services/reputation/Reputation.js"
import { Outcomes, OutcomesFoldLive } from "../services/reputation/Outcomes.js"
import { GasWatch, GasWatchLive } from "../services/treasury/GasWatch.js"
import { Reconciliation, ReconciliationWorkerLive } from "../services/treasury/Reconciliation.js"
import { ChannelReconciliation } from "../services/treasury/ChannelReconciliation.js"
import { TreasuryMachine } from "../services/treasury/treasurySpec.js"
import { TreasuryWorker, TreasuryWorkerLive } from "../services/treasury/TreasuryWorker.js"
import { OperatorLog } from "../services/operator/Actions.js"
import { Inspection } from "../services/operator/Inspection.js"
import { Levers } from "../services/operator/Levers.js"
import { Decisions } from "../services/operator/Decisions.js"
import { OperatorStats } from "../services/operator/Stats.js"
import { Attention } from "../services/operator/Attention.js"
import { OperatorChannels } from "../services/operator/Channels.js"
import { Search } from "../services/operator/Search.js"
import { AgentView } from "../services/operator/AgentView.js"
import { OperatorTransactions } from "../services/operator/Transactions.js"
import { MachineRunnersLive } from "./MachineRunners.js"
import { OperatorToken } from "./http/OperatorHttp.js"
import { devnetOperatorToken } from "../layers/devnet/operatorToken.js"
import { announceReady } from "./cluster/supervised.js"
import { TokenThrottle } from "../services/operator/TokenThrottle.js"
import { HttpLive } from "./http/Server.js"
import { CompactAfterStartLive, CompactBeforeListeningLive } from "./heapCompaction.js"

/** The operator token: configured, or (devnet only; config refuses its absence elsewhere) generated for this run. */
export const OperatorTokenLive = Layer.effect(
  OperatorToken,
  Effect.flatMap(AppConfig, (config) =>
    Option.match(config.operatorToken, {
      onSome: Effect.succeed,
      // Devnet: kept in DATA_DIR across restarts (layers/devnet/operatorToken.ts).
      onNone: () => Effect.map(Effect.promise(() => devnetOperatorToken(config.dataDir)), Redacted.make)
    }))
)

/** Domain services and background workers on top of the database and the given chain layer. */
/** Background workers (timers, settlement recovery, refunds, webhooks and callbacks, probes); BACKGROUND_WORKERS=false leaves them to be driven by hand (tests). */
const WorkersLive = Layer.unwrapEffect(
  Effect.map(Config.boolean("BACKGROUND_WORKERS").pipe(Config.withDefault(true)), (enabled) =>
    enabled
      ? Layer.mergeAll(
        PaymentsRecoveryLive,
        UptoRecoveryLive,
        TimersWorkerLive(),
        TreasuryWorkerLive,
        ReconciliationWorkerLive,
        GasWatchLive,
        HealthProbesLive,
        OutcomesFoldLive,
        RateLimitPruneLive,
        UsedSignaturesPruneLive,
        WebhooksWorkerLive,
        ChannelClaimsWorkerLive
      )
      : Layer.empty)
)

/**
 * At start: the treasury's nonce catches up with the chain, unfinished treasury transactions are sent again (nothing
 * waits behind a nonce a killed process left unsent) and the ledger's treasury gets its opening balance.
 */
const TreasuryStartLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const worker = yield* TreasuryWorker
    const reconciliation = yield* Reconciliation
    yield* worker.start.pipe(Effect.catchAll((e) => Effect.logWarning(`treasury start (nonce sync, rebroadcast): ${e.message}`)))
    yield* reconciliation.open.pipe(Effect.catchAll((e) => Effect.logWarning(`treasury opening balance: ${e.message}`)))
  })
)

/** The machine registry with every feature's machine spec (the host's runners). */
const MachinesLive = withTransitionMetrics(MachineRunnersLive).pipe(
  Layer.provide(Layer.mergeAll(ExecutionMachine.Default, SettlementMachine.Default, CircuitMachine.Default, TreasuryMachine.Default, WithdrawalMachine.Default, DisputeMachine.Default, DeliveryMachine.Default, ChainMachine.Default, ChannelMachine.Default).pipe(Layer.provide(ChainBudgetReturnsLive)))
)

/**
 * Every feature's service (each brings its own dependencies; layers are shared by reference, so each service is built
 * once), the workers, and the machine registry, on top of the database and the given chain layer.
 */
export const makeServicesLive = <E>(chain: Layer.Layer<Chain, E, AppConfig>) =>
  Layer.mergeAll(WorkersLive, TreasuryStartLive).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        Agents.Default,
        AgentRegistration.Default,
        Withdrawals.Default,
        Disputes.Default,
        Subscriptions.Default,
        DeliveryLog.Default,
        Dispatcher.Default,
        ClientIds.Default,
        History.Default,
        Executions.Default,
        Receipts.Default,
        Chains.Default,
        ChainCalls.Default,
        ChainRoots.Default,
        SpendingLimits.Default,
        Credits.Default,
        Remainders.Default,
        Deposits.Default,
        Balances.Default,
        Payments.Default,
        Refunds.Default,
        TreasuryWorker.Default,
        Reconciliation.Default,
        ChannelReconciliation.Default,
        GasWatch.Default,
        Circuits.Default,
        Reputation.Default,
        Outcomes.Default,
        RateLimits.Default,
        Ledger.Default,
        MachineHost.Default,
        PaymentVerifier.Default,
        Paywall.Default,
        AgentProxy.Default,
        OperatorTokenLive,
        Discovery.Default,
        DiscoveryResources.Default,
        Analytics.Default,
        ReputationBoard.Default,
        Inspection.Default,
        OperatorLog.Default,
        Levers.Default,
        Decisions.Default,
        OperatorStats.Default,
        Attention.Default,
        OperatorChannels.Default,
        Search.Default,
        AgentView.Default,
        OperatorTransactions.Default,
        TokenThrottle.Default,
        Leases.Default,
        ChannelTerms.Default,
        UptoTerms.Default,
        UptoSettlements.Default,
        ChannelClaims.Default,
        ChannelRefunds.Default,
        ChannelRefundRequests.Default,
        WithdrawWatch.Default
      )
    ),
    Layer.provide(MachinesLive),
    // The database's chain identity is checked (and recorded) before any service is built: nothing is sent first.
    Layer.provideMerge(Layer.provideMerge(Layer.provideMerge(ChainIdentityLive, NetworksLive), Layer.mergeAll(PgLive, chain)))
  )

/**
 * A client gets HTTP_REQUEST_TIMEOUT_MS (30 s) to send its whole request and a third of it for the headers, so a slow
 * body cannot hold a connection for Node's default 300 s; checked every second. (Time the agent takes to answer is not
 * counted: the request has arrived by then.)
 */
const requestTimeoutMs = Config.integer("HTTP_REQUEST_TIMEOUT_MS").pipe(
  Config.withDefault(30_000),
  Config.validate({ message: "HTTP_REQUEST_TIMEOUT_MS must be between 1000 and 300000", validation: (n) => n >= 1_000 && n <= 300_000 })
)

const NodeServerLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const { host, port } = yield* AppConfig
    const requestTimeout = yield* requestTimeoutMs
    const options = { requestTimeout, headersTimeout: Math.ceil(requestTimeout / 3), connectionsCheckingInterval: 1_000 }
    return NodeHttpServer.layer(() => createServer(options), { port, host })
  })
)

/** Prints where everything is once the server listens. */
const BannerLive = Layer.effectDiscard(
  Effect.gen(function* () {
    const config = yield* AppConfig
    const chain = yield* Chain
    const networks = yield* Networks
    const db = yield* DatabaseInfo
    const token = yield* OperatorToken
    const address = yield* HttpServer.addressFormattedWith((url) => Effect.succeed(url))
    const lines = [
      `agent marketplace listening on ${address}`,
      `  mode:            ${chain.mode}`,
      `  database:        ${db.mode}${db.dataDir === undefined ? "" : ` (data in ${db.dataDir})`}`,
      `  chain RPC:       ${chain.rpcUrl} (chain id ${chain.chainId}, x402 network "${chain.network}")`,
      `  USDC:            ${chain.usdc.address}`,
      `  treasury:        ${chain.treasury}`,
      ...networks.all.slice(1).map((n) => `  also paid on:    ${n.network} (chain id ${n.chainId}, x402 v2 "eip155:${n.chainId}", RPC ${n.rpcUrl}, USDC ${n.usdc.address})`),
      `  docs:            ${address}/docs  (OpenAPI: ${address}/openapi.json)`,
      ...(chain.mode === "devnet" && Option.isNone(config.operatorToken) ? [`  operator token:  ${Redacted.value(token)} (kept in ${config.dataDir}/operator-token)`] : [])
    ]
    const { format } = yield* LogSettings
    // JSON logs stay one object per line: the banner becomes one record there (without the devnet operator token).
    if (format === "json") {
      yield* Effect.logInfo(`agent marketplace listening on ${address}`, { address, mode: chain.mode, database: db.mode, chainId: chain.chainId, network: chain.network, usdc: chain.usdc.address, treasury: chain.treasury })
    } else yield* Effect.sync(() => console.log(lines.join("\n")))
    yield* Effect.sync(announceReady)
  })
)

/**
 * The whole service for a given chain layer (ChainLive in production, an attached devnet in tests). Logging and tracing
 * come first: everything built on top logs through the one logger and records spans only when an exporter is set.
 */
export const makeAppLive = <E>(
  chain: Layer.Layer<Chain, E, AppConfig>,
  options: { readonly banner: boolean; readonly compactHeap?: boolean } = { banner: true }
) =>
  Layer.mergeAll(HttpLive, options.banner ? BannerLive : Layer.empty, options.compactHeap === true ? CompactAfterStartLive() : Layer.empty).pipe(
    // compactHeap: once the services are up and before the port opens, then again once it serves (src/heapCompaction.ts)
    Layer.provide(options.compactHeap === true ? Layer.provide(NodeServerLive, CompactBeforeListeningLive) : NodeServerLive),
    Layer.provideMerge(makeServicesLive(chain)),
    Layer.provide(TracingLive),
    Layer.provide(LoggingLive)
  )

/** The service as `npm start` runs it: with the banner, and memory-reducing GCs as it starts to serve (src/heapCompaction.ts). */
export const AppLive = makeAppLive(ChainLive, { banner: true, compactHeap: true })
