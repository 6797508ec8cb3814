// One opossum circuit breaker per agent around the outbound exchange, sharing one bucket-rotation timer; state changes go to a PubSub.
import { Effect, PubSub } from "effect"
import { EventEmitter } from "node:events"
import CircuitBreaker from "opossum"
import { AgentCallError, CallInterrupted } from "./errors.js"

export interface BreakerChange {
  readonly agentId: string
  readonly state: "open" | "half-open" | "closed"
}

/**
 * opossum settings shared by every agent's breaker. It opens when, within the rolling 60 s window, at least
 * `volumeThreshold` calls were made and the failure rate is strictly above `errorThresholdPercentage`
 * (opossum compares with `>`: exactly 50% keeps it closed). `resetTimeout` comes from CIRCUIT_RESET_TIMEOUT_MS.
 */
export const BREAKER_OPTIONS = {
  timeout: false,
  errorThresholdPercentage: 50,
  volumeThreshold: 5,
  rollingCountTimeout: 60_000,
  rollingCountBuckets: 10
} as const

/** The breakers for the scope: created on first use per agent, all shut down when the scope closes. */
export const makeBreakers = <Args extends Array<unknown>, Reply>(action: (...args: Args) => Promise<Reply>, resetTimeout: number) =>
  Effect.gen(function* () {
    const changes = yield* Effect.acquireRelease(PubSub.unbounded<BreakerChange>(), PubSub.shutdown)

    // One timer rotates the statistics buckets of every breaker (opossum would start two intervals per breaker).
    const rotation = new EventEmitter()
    rotation.setMaxListeners(0)
    const breakers = new Map<string, CircuitBreaker<Args, Reply>>()
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        const timer = setInterval(
          () => rotation.emit("rotate"),
          Math.floor(BREAKER_OPTIONS.rollingCountTimeout / BREAKER_OPTIONS.rollingCountBuckets)
        )
        timer.unref()
        return timer
      }),
      (timer) =>
        Effect.sync(() => {
          clearInterval(timer)
          for (const breaker of breakers.values()) breaker.shutdown()
          breakers.clear()
        })
    )

    const breakerFor = (agentId: string) => {
      const existing = breakers.get(agentId)
      if (existing !== undefined) return existing
      const breaker = new CircuitBreaker<Args, Reply>(action, {
        ...BREAKER_OPTIONS,
        resetTimeout,
        name: agentId,
        rotateBucketController: rotation,
        enableSnapshots: false,
        rollingPercentilesEnabled: false,
        // Policy refusals and callers that went away say nothing about the agent's health. opossum records a
        // filtered error as a success (it has no "neither"), which can also close a half-open breaker.
        errorFilter: (error: unknown) =>
          error instanceof CallInterrupted || (error instanceof AgentCallError && error.kind === "blocked_url")
      })
      const publish = (state: BreakerChange["state"]) => () => void changes.unsafeOffer({ agentId, state })
      breaker.on("open", publish("open"))
      breaker.on("halfOpen", publish("half-open"))
      breaker.on("close", () => {
        publish("closed")()
        // opossum keeps the failures that opened the breaker in its rolling window, so right after a successful
        // half-open trial a single failure would open it again. Like Hystrix, a closed breaker starts afresh:
        // this one retires and the next call creates a new one.
        if (breakers.get(agentId) === breaker) breakers.delete(agentId)
        breaker.shutdown()
      })
      breakers.set(agentId, breaker)
      return breaker
    }

    const isOpen = (agentId: string): boolean => breakers.get(agentId)?.opened === true

    return { changes, breakerFor, isOpen } as const
  })
