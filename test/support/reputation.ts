// Reputation in tests: execution outcomes are folded into scores by a worker (services/reputation/Outcomes.ts); a test
// that reads reputation, health or counters right after an execution folds the waiting outcomes first, without sleeping.
import { Effect } from "effect"
import { Outcomes } from "../../services/reputation/Outcomes.js"

/** Folds every outcome committed so far (and waits for a fold pass already under way). */
export const foldOutcomes = Effect.flatMap(Outcomes, (outcomes) => outcomes.foldAll)
