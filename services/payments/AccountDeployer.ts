// Counterfactual (ERC-6492) payers: before such a payment settles, the treasury deploys the account through the factory
// its signature names (an allowed one only), as @x402/evm's facilitator does; the token can then check the account's
// ERC-1271 signature. A treasury transaction of its own (purpose 'account_deploy', subject the account), ahead of the
// settlement, and at most one per account: concurrent payments of one account wait for the same deployment.
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import type { Hex } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { erc6492DeploymentOf, isAllowedFactory, SmartAccountConfig } from "../../layers/x402/smartAccount.js"
import { isUniqueViolation } from "../sql/SqlErrors.js"
import { TreasuryWriter } from "../treasury/TreasuryWriter.js"
import { pending, type Settlement } from "./chainOutcome.js"
import { withSpan } from "../../layers/observability/span.js"

/** The most gas a factory call may take (a real account factory deploys a proxy: ≈ 150,000-350,000). */
const MAX_DEPLOY_GAS = 1_000_000n

/** Runs `self` alone per key in this process (a semaphore per key, dropped when nobody holds or waits for it). */
const keyedMutex = () => {
  const held = new Map<string, { readonly lock: Effect.Semaphore; users: number }>()
  return <A, E, R>(key: string, self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      const entry = held.get(key) ?? { lock: Effect.unsafeMakeSemaphore(1), users: 0 }
      held.set(key, entry)
      entry.users++
      return entry.lock.withPermits(1)(self).pipe(
        Effect.ensuring(Effect.sync(() => {
          if (--entry.users === 0) held.delete(key)
        }))
      )
    })
}

export class AccountDeployer extends Effect.Service<AccountDeployer>()("payments/AccountDeployer", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const writers = yield* TreasuryWriter
    const config = yield* SmartAccountConfig

    const failed = (reason: "eip6492_factory_not_allowed" | "smart_wallet_deployment_failed", message: string): Option.Option<Settlement> =>
      Option.some({ outcome: { _tag: "Failed", reason, message }, tx: Option.none() })

    const codeAt = (chain: ChainShape, address: `0x${string}`) =>
      Effect.tryPromise(() => chain.publicClient.getCode({ address })).pipe(Effect.map((code) => code !== undefined && code !== "0x"))

    /** The account's latest deployment that reached (or may reach) the chain: any state but dropped. */
    const lastDeployment = (network: string, account: string, paymentId: string) =>
      Effect.map(
        sql<{ state: string }>`SELECT state FROM treasury_txs
          WHERE purpose = 'account_deploy' AND network = ${network} AND subject_id IN (${account}, ${paymentId}) AND state <> 'dropped'
          ORDER BY created_at DESC LIMIT 1`,
        (rows) => Option.fromNullable(rows[0]?.state)
      )

    const oneAtATime = keyedMutex()

    /**
     * Makes sure the payer of `p` exists on chain before its settlement: nothing to do for a key or a deployed account;
     * a counterfactual one is deployed through its (allowed) factory, once. `None`: settle now; otherwise the
     * settlement's outcome for now (pending while the deployment is in flight or the chain cannot be read; failed when
     * the factory is not allowed, its call reverts or deployed nothing, or the payment expires too soon to be worth a
     * deployment). Payments of one account wait here for each other in this process; across processes the account's
     * one live deployment (a unique index) leaves the others pending, for the recovery pass.
     */
    const ensureDeployed = (paymentId: string, p: VerifiedPayment): Effect.Effect<Option.Option<Settlement>> =>
      Effect.gen(function* () {
        const deployment = erc6492DeploymentOf(p.signature)
        if (deployment === undefined) return Option.none()
        // On the payment's network: the account must exist where its authorization is settled.
        const writer = writers.on(p.network)
        const chain = writer.chain
        if (yield* codeAt(chain, p.payer)) return Option.none()
        if (!isAllowedFactory(config, deployment.factory)) {
          return failed("eip6492_factory_not_allowed", `the account's factory ${deployment.factory} is not allowed (X402_EIP6492_ALLOWED_FACTORIES)`)
        }
        return yield* oneAtATime(`${p.network}:${p.payer}`, Effect.gen(function* () {
          // The payment before this one of the same account may just have deployed it.
          if (yield* codeAt(chain, p.payer)) return Option.none()
          const previous = yield* lastDeployment(p.network, p.payer, paymentId)
          if (Option.isSome(previous)) {
            switch (previous.value) {
              // Still signed or broadcast (another process, or a crash after signing): the treasury worker finishes it.
              case "signed":
              case "broadcast":
              case "reorged":
                return Option.some(pending("the smart account's deployment transaction is in flight"))
              case "reverted":
                return failed("smart_wallet_deployment_failed", "the account's deployment reverted; it is not sent again")
              default:
                return failed("smart_wallet_deployment_failed", "the factory call did not deploy the payer's account; it is not sent again")
            }
          }
          // A deployment is sent only while the payment stays valid long enough for it and the settlement behind it.
          const now = BigInt(Math.floor((yield* Clock.currentTimeMillis) / 1000))
          if (p.validBefore <= now + BigInt(config.deploySeconds)) {
            return failed("smart_wallet_deployment_failed", `the payment expires in less than ${config.deploySeconds} s: too soon to deploy the account and settle; nothing was deployed`)
          }
          if (Option.isNone(writer.address)) return Option.some(pending("no treasury signer deploys smart accounts here"))
          const from = writer.address.value
          const estimate = yield* Effect.tryPromise(() =>
            chain.publicClient.estimateGas({ account: from, to: deployment.factory, data: deployment.factoryData as Hex })
          ).pipe(Effect.either)
          if (estimate._tag === "Left") return failed("smart_wallet_deployment_failed", "the account's factory call reverts")
          const gas = estimate.right + estimate.right / 5n
          if (gas > MAX_DEPLOY_GAS) return failed("smart_wallet_deployment_failed", `the account's deployment needs more than ${MAX_DEPLOY_GAS} gas`)
          const submitted = yield* writer.submit({ purpose: "account_deploy", subjectId: p.payer, to: deployment.factory, data: deployment.factoryData, gas }).pipe(
            Effect.map(Option.some),
            // Another process signed this account's deployment first (treasury_txs_one_live_deploy).
            Effect.catchIf((e) => isUniqueViolation(e, "treasury_txs_one_live_deploy"), () => Effect.succeed(Option.none()))
          )
          if (Option.isNone(submitted)) return Option.some(pending("the smart account's deployment transaction is in flight"))
          const tx = submitted.value
          const receipt = yield* writer.awaitReceipt(tx)
          if (Option.isNone(receipt)) return Option.some(pending("the smart account's deployment is not mined yet"))
          yield* sql.withTransaction(writer.recordIn(tx.id, { _tag: "Mined", receipt: receipt.value }))
          if (yield* codeAt(chain, p.payer)) return Option.none()
          return failed("smart_wallet_deployment_failed", "the factory call did not deploy the payer's account")
        }))
      }).pipe(
        Effect.catchAll((e) => Effect.succeed(Option.some(pending(`smart account deployment: ${"message" in e ? String(e.message) : String(e)}`.slice(0, 300))))),
        withSpan("AccountDeployer.ensureDeployed")
      )

    return { ensureDeployed } as const
  }),
  dependencies: [TreasuryWriter.Default]
}) {}
