// Leases in PostgreSQL: work that must run once per cluster runs only in the instance holding its lease (migrations/
// 0042_leases.sql). A keeper takes or renews its lease with one statement every LEASE_TTL_MS / 3 and starts the work on
// taking it; when a renewal fails, or does not answer within that third, it stops the work at once, well before the
// lease can pass to another instance. A holder that stops releases its lease (another takes it at its next attempt);
// one that dies loses it when it expires. Expiry is the database's clock, so hosts need not agree on the time.
import { SqlClient } from "@effect/sql"
import { Clock, Config, Duration, Effect, FiberHandle, Option, Ref, Schedule, type Scope } from "effect"
import { Instance } from "./Instance.js"

/** How long a lease lasts without renewal: the longest a dead holder's work stays undone. */
export const leaseTtlMs = Config.integer("LEASE_TTL_MS").pipe(
  Config.withDefault(15_000),
  Config.validate({ message: "LEASE_TTL_MS must be between 1000 and 300000", validation: (n) => n >= 1_000 && n <= 300_000 })
)

/** The machine's clock, whatever clock the caller runs on (a TestClock in tests): what a statement's answer takes. */
const realClock = Clock.make()

export interface LeaseHooks<R> {
  /** Runs when this instance takes the lease. */
  readonly onGain?: Effect.Effect<void, never, R>
  /** Runs when it loses or releases it. */
  readonly onLose?: Effect.Effect<void, never, R>
  /** Renew on the machine's clock rather than the caller's (a keeper that only gates output, never work to drive). */
  readonly realTime?: boolean
}

export class Leases extends Effect.Service<Leases>()("cluster/Leases", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const instance = yield* Instance
    const ttlMs = yield* leaseTtlMs
    const me = instance.id

    /**
     * Takes the lease when it is free or expired, renews it when this instance holds it; true when this instance holds
     * it afterwards. One statement: two instances asking at once cannot both win (the row's lock orders them).
     */
    const acquire = (name: string) =>
      sql<{ holder: string }>`
        INSERT INTO leases (name, holder, expires_at) VALUES (${name}, ${me}, now() + ${ttlMs}::int * interval '1 millisecond')
        ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
          acquired_at = CASE WHEN leases.holder = EXCLUDED.holder THEN leases.acquired_at ELSE now() END
        WHERE leases.holder = EXCLUDED.holder OR leases.expires_at <= now()
        RETURNING holder`.pipe(Effect.map((rows) => rows.length > 0))

    /** Gives the lease up (only if this instance holds it). */
    const release = (name: string) => sql`DELETE FROM leases WHERE name = ${name} AND holder = ${me}`.pipe(Effect.asVoid)

    /** Who holds a lease now (none when nobody does, or its holder let it expire). */
    const holderOf = (name: string) =>
      sql<{ holder: string }>`SELECT holder FROM leases WHERE name = ${name} AND expires_at > now()`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]?.holder))
      )

    const renewEvery = Duration.millis(Math.floor(ttlMs / 3))

    /**
     * Keeps `name` for the life of the scope: an attempt at once (a lone instance holds it when this returns), then
     * every TTL / 3. `held` says whether this instance holds it as of its latest attempt.
     */
    const keep = <R>(name: string, hooks: LeaseHooks<R> = {}): Effect.Effect<{ readonly held: Effect.Effect<boolean> }, never, R | Scope.Scope> =>
      Effect.gen(function* () {
        const held = yield* Ref.make(false)
        // A statement is never interrupted (its cancel request could reach the next statement on its connection): an
        // attempt that takes too long (real time: the lease expires on the database's clock) is let go in the
        // background and counts as not holding.
        const attempt = acquire(name).pipe(
          Effect.uninterruptible,
          Effect.disconnect,
          Effect.timeout(renewEvery),
          Effect.withClock(realClock),
          Effect.catchAllCause((cause) => Effect.as(Effect.logDebug(`lease ${name}: attempt failed`, cause), false))
        )
        const step = Effect.gen(function* () {
          const now = yield* attempt
          const was = yield* Ref.getAndSet(held, now)
          if (now && !was) {
            yield* Effect.logInfo(`lease ${name} taken by instance ${me}`, { event: "lease.taken", lease: name, instance: me })
            yield* hooks.onGain ?? Effect.void
          } else if (!now && was) {
            yield* Effect.logWarning(`lease ${name} lost by instance ${me}: its work stops here`, { event: "lease.lost", lease: name, instance: me })
            yield* hooks.onLose ?? Effect.void
          }
        })
        // Closing: the renewals stop first (finalizers run last-added first), then the work, then the row goes.
        yield* Effect.addFinalizer(() =>
          Effect.gen(function* () {
            if (!(yield* Ref.getAndSet(held, false))) return
            yield* hooks.onLose ?? Effect.void
            yield* release(name).pipe(Effect.timeout(renewEvery), Effect.withClock(realClock), Effect.ignore)
            yield* Effect.logInfo(`lease ${name} released by instance ${me}`, { event: "lease.released", lease: name, instance: me })
          }))
        yield* step
        const renewals = step.pipe(Effect.repeat(Schedule.spaced(renewEvery)), Effect.delay(renewEvery))
        yield* (hooks.realTime === true ? Effect.withClock(renewals, realClock) : renewals).pipe(Effect.forkScoped)
        return { held: Ref.get(held) } as const
      })

    /** Runs `work` (typically a repeating loop) only while this instance holds `name`: started on taking it, interrupted on losing it. */
    const whileHolding = <R>(name: string, work: Effect.Effect<void, never, R>) =>
      Effect.gen(function* () {
        const handle = yield* FiberHandle.make<void, never>()
        return yield* keep(name, { onGain: Effect.asVoid(FiberHandle.run(handle, work)), onLose: FiberHandle.clear(handle) })
      })

    return { acquire, release, holderOf, keep, whileHolding, instance: me, ttlMs } as const
  }),
  dependencies: [Instance.Default]
}) {}
