// A payer's credit (metered calls' remainders it chose to keep, `X-Remainder: credit`): read and withdrawn on chain with
// the payer wallet's EIP-712 signature (the spending limits' headers and domain; type `PayerCredit`). A withdrawal
// moves the credit to remainders payable and queues a remainder, paid back in the next batch (Remainders.ts); it must be
// signed later than the last withdrawal (no replay). docs/clients.md "Metered calls".
import { SqlClient } from "@effect/sql"
import { Clock, Effect } from "effect"
import { getAddress, isHex, recoverTypedDataAddress } from "viem"
import { Chain } from "../../layers/Chain.js"
import { Conflict, Unauthorized } from "../../src/domain/Errors.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { SIGNATURE_MAX_AGE_MS, SIGNATURE_MAX_FUTURE_MS } from "../agents/WalletAuth.js"
import { Ledger } from "../ledger/Ledger.js"
import type { PayerHeaders } from "../limits/authorization.js"
import { payoutDomain } from "../withdrawals/PayoutAuthorization.js"
import { creditAccount, REMAINDERS_PAYABLE, RemaindersRepo } from "./Repo.js"

export const creditTypes = {
  PayerCredit: [
    { name: "action", type: "string" },
    { name: "payer", type: "address" },
    { name: "amount", type: "uint256" },
    { name: "signedAt", type: "uint256" }
  ]
} as const

export type CreditAction = "read" | "withdraw"

/** The signed message: `amount` in micro-USDC (0 for a read, or to withdraw the whole credit). */
export const creditMessage = (action: CreditAction, payer: string, amount: bigint, signedAt: number) => ({
  action,
  payer: getAddress(payer.toLowerCase()),
  amount,
  signedAt: BigInt(signedAt)
})

export class Credits extends Effect.Service<Credits>()("remainders/Credits", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const chain = yield* Chain
    const ledger = yield* Ledger
    const repo = yield* RemaindersRepo
    const domain = payoutDomain(chain.chainId, chain.treasury)

    const verify = (action: CreditAction, payer: string, amount: bigint, headers: PayerHeaders) =>
      Effect.gen(function* () {
        const signature = headers["x-payer-signature"]?.trim() ?? ""
        const signedAtText = headers["x-payer-signed-at"]?.trim() ?? ""
        if (signature === "" || signedAtText === "") {
          return yield* new Unauthorized({
            code: "PAYER_AUTH_REQUIRED",
            message: "X-Payer-Signature and X-Payer-Signed-At are required: the payer wallet's EIP-712 PayerCredit signature (docs/clients.md)"
          })
        }
        if (!/^0x[0-9a-fA-F]{130}$/.test(signature) || !isHex(signature) || !/^\d{1,16}$/.test(signedAtText)) {
          return yield* new Unauthorized({ code: "PAYER_SIGNATURE_INVALID", message: "X-Payer-Signature must be a 0x 65-byte signature and X-Payer-Signed-At milliseconds since the epoch" })
        }
        const signedAt = Number(signedAtText)
        const now = yield* Clock.currentTimeMillis
        if (now - signedAt > SIGNATURE_MAX_AGE_MS) return yield* new Unauthorized({ code: "AUTH_EXPIRED", message: "the signature is older than 5 minutes", details: { signedAt, now } })
        if (signedAt - now > SIGNATURE_MAX_FUTURE_MS) return yield* new Unauthorized({ code: "AUTH_FUTURE_TIMESTAMP", message: "the signed timestamp is in the future", details: { signedAt, now } })
        const recovered = yield* Effect.tryPromise(() =>
          recoverTypedDataAddress({ domain, types: creditTypes, primaryType: "PayerCredit", message: creditMessage(action, payer, amount, signedAt), signature })
        ).pipe(Effect.orElseSucceed(() => undefined))
        if (recovered === undefined || recovered.toLowerCase() !== payer.toLowerCase()) {
          return yield* new Unauthorized({ code: "PAYER_SIGNATURE_INVALID", message: "X-Payer-Signature does not recover to this wallet for this action, amount and X-Payer-Signed-At", details: { action } })
        }
        return signedAt
      })

    /** The payer's credit (signed read). */
    const balance = (wallet: string, headers: PayerHeaders) =>
      Effect.gen(function* () {
        yield* verify("read", wallet, 0n, headers)
        const credit = yield* repo.creditOf(wallet, false).pipe(Effect.orDie)
        return { wallet: wallet.toLowerCase(), credit: formatUsdc(credit) }
      }).pipe(Effect.withSpan("Credits.balance"))

    /** Withdraws `amount` (undefined: all) of the payer's credit to its wallet on chain, in the next remainder batch. */
    const withdraw = (wallet: string, amount: bigint | undefined, headers: PayerHeaders) =>
      Effect.gen(function* () {
        const signedAt = yield* verify("withdraw", wallet, amount ?? 0n, headers)
        return yield* sql.withTransaction(Effect.gen(function* () {
          // Replay: only a withdrawal signed later than the last one (the upsert's WHERE; concurrent ones serialise on it).
          const fresh = yield* sql`
            INSERT INTO credit_withdrawals (wallet, last_signed_at_ms) VALUES (${wallet.toLowerCase()}, ${signedAt})
            ON CONFLICT (wallet) DO UPDATE SET last_signed_at_ms = EXCLUDED.last_signed_at_ms
            WHERE credit_withdrawals.last_signed_at_ms < EXCLUDED.last_signed_at_ms RETURNING wallet`
          if (fresh.length === 0) {
            return yield* new Unauthorized({ code: "AUTH_SIGNATURE_REUSED", message: "a credit withdrawal must be signed later than the last one", details: { signedAt } })
          }
          const credit = yield* repo.creditOf(wallet, true)
          const take = amount ?? credit
          if (take <= 0n || take > credit) {
            return yield* new Conflict({ code: "INSUFFICIENT_CREDIT", message: "nothing to withdraw, or more than the credit", details: { credit: formatUsdc(credit) } })
          }
          yield* repo.create({ executionId: null, paymentId: null, to: wallet, amount: take, source: "credit_withdrawal" })
          yield* ledger.transfer({
            kind: "credit_withdrawal",
            movements: [{ debit: creditAccount(wallet), credit: REMAINDERS_PAYABLE, amount: take }],
            subjectId: wallet.toLowerCase()
          }).pipe(Effect.catchTag("LedgerInvariantError", Effect.die))
          return { wallet: wallet.toLowerCase(), withdrawn: formatUsdc(take), credit: formatUsdc(credit - take), status: "pending" as const }
        })).pipe(Effect.catchTag("SqlError", Effect.die))
      }).pipe(Effect.withSpan("Credits.withdraw"))

    return { balance, withdraw } as const
  }),
  dependencies: [Ledger.Default, RemaindersRepo.Default]
}) {}
