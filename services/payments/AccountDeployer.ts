// Counterfactual (ERC-6492) payers: before such a payment settles, the treasury deploys the account through the factory
// its signature names (an allowed one only), as @x402/evm's facilitator does; the token can then check the account's
// ERC-1271 signature. A treasury transaction of its own (purpose 'account_deploy'), ahead of the settlement.
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { Hex } from "viem"
import type { ChainShape } from "../../layers/Chain.js"
import type { VerifiedPayment } from "../../layers/x402/payment.js"
import { erc6492DeploymentOf, isAllowedFactory, SmartAccountConfig } from "../../layers/x402/smartAccount.js"
import { TreasuryRepo } from "../treasury/Repo.js"
import { TreasuryWriter } from "../treasury/TreasuryWriter.js"
import { pending, type Settlement } from "./chainOutcome.js"
import { withSpan } from "../../layers/observability/span.js"

/** The most gas a factory call may take (a real account factory deploys a proxy: ≈ 150,000-350,000). */
const MAX_DEPLOY_GAS = 1_000_000n

export class AccountDeployer extends Effect.Service<AccountDeployer>()("payments/AccountDeployer", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const writers = yield* TreasuryWriter
    const treasury = yield* TreasuryRepo
    const config = yield* SmartAccountConfig

    const failed = (reason: "eip6492_factory_not_allowed" | "smart_wallet_deployment_failed", message: string): Option.Option<Settlement> =>
      Option.some({ outcome: { _tag: "Failed", reason, message }, tx: Option.none() })

    const codeAt = (chain: ChainShape, address: `0x${string}`) =>
      Effect.tryPromise(() => chain.publicClient.getCode({ address })).pipe(Effect.map((code) => code !== undefined && code !== "0x"))

    /**
     * Makes sure the payer of `p` exists on chain before its settlement: nothing to do for a key or a deployed account;
     * a counterfactual one is deployed through its (allowed) factory. `None`: settle now; otherwise the settlement's
     * outcome for now (pending while the deployment is not mined or the chain cannot be read; failed when the factory
     * is not allowed or its call reverts). A deployment in flight is left to the treasury worker; should one be sent twice
     * anyway, factories return the existing account.
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
        // A deployment already signed for this payment (a crash after signing it) is the treasury worker's to finish:
        // never sign a second one beside it.
        if (Option.isSome(yield* treasury.liveFor("account_deploy", paymentId))) {
          return Option.some(pending("the smart account's deployment transaction is in flight"))
        }
        if (Option.isNone(writer.address)) return Option.some(pending("no treasury signer deploys smart accounts here"))
        const from = writer.address.value
        const estimate = yield* Effect.tryPromise(() =>
          chain.publicClient.estimateGas({ account: from, to: deployment.factory, data: deployment.factoryData as Hex })
        ).pipe(Effect.either)
        if (estimate._tag === "Left") return failed("smart_wallet_deployment_failed", "the account's factory call reverts")
        const gas = estimate.right + estimate.right / 5n
        if (gas > MAX_DEPLOY_GAS) return failed("smart_wallet_deployment_failed", `the account's deployment needs more than ${MAX_DEPLOY_GAS} gas`)
        const tx = yield* writer.submit({ purpose: "account_deploy", subjectId: paymentId, to: deployment.factory, data: deployment.factoryData, gas })
        const receipt = yield* writer.awaitReceipt(tx)
        if (Option.isNone(receipt)) return Option.some(pending("the smart account's deployment is not mined yet"))
        yield* sql.withTransaction(writer.recordIn(tx.id, { _tag: "Mined", receipt: receipt.value }))
        if (yield* codeAt(chain, p.payer)) return Option.none()
        return failed("smart_wallet_deployment_failed", "the factory call did not deploy the payer's account")
      }).pipe(
        Effect.catchAll((e) => Effect.succeed(Option.some(pending(`smart account deployment: ${"message" in e ? String(e.message) : String(e)}`.slice(0, 300))))),
        withSpan("AccountDeployer.ensureDeployed")
      )

    return { ensureDeployed } as const
  }),
  dependencies: [TreasuryWriter.Default, TreasuryRepo.Default]
}) {}
