// The console's GET pages for a signed-in operator: what needs attention (the first page), the overview, a machine kind's
// diagram and actors, one actor, an agent, search, and the record of operator actions.
import { Clock, Effect, Either, Option, Schema } from "effect"
import { OperatorLog } from "../../services/operator/Actions.js"
import { AgentView } from "../../services/operator/AgentView.js"
import { Attention } from "../../services/operator/Attention.js"
import { Inspection } from "../../services/operator/Inspection.js"
import { Search } from "../../services/operator/Search.js"
import { OperatorStats } from "../../services/operator/Stats.js"
import { MachineKindSchema, OPERATOR_PAGE_DEFAULT } from "../domain/Operator.js"
import type { Html } from "./html.js"
import { actionsPage, actorPage } from "./pages/actor.js"
import { agentPage } from "./pages/agent.js"
import { attentionPage } from "./pages/attention.js"
import { messagePage } from "./pages/login.js"
import { listPage } from "./pages/machines.js"
import { overviewPage } from "./pages/overview.js"
import { hitPath, searchPage } from "./pages/search.js"
import type { Notice } from "./pages/types.js"

const HISTORY_PAGE = 200
const decodeKind = Schema.decodeUnknownEither(MachineKindSchema)

export type View =
  | { readonly _tag: "Page"; readonly status: number; readonly title: string; readonly body: Html; readonly flashShown?: boolean }
  | { readonly _tag: "Redirect"; readonly location: string }

const page = (title: string, body: Html, status = 200): View => ({ _tag: "Page", status, title, body })
const message = (status: number, title: string, text: string): View => page(title, messagePage(text), status)
const badCursor = () => message(400, "Bad page link", "that page link is not one the console handed out")

/** The page for a GET of `/ops/<segments>`; `flash` is the notice a lever left for the actor page. */
export const view = (segments: ReadonlyArray<string>, url: URL, csrf: string, flash: Notice | undefined) =>
  Effect.gen(function* () {
    const now = new Date(yield* Clock.currentTimeMillis)
    const inspection = yield* Inspection
    const [first, second, third] = segments
    if (segments.length === 0) {
      const items = yield* (yield* Attention).list(now)
      return page("Needs attention", attentionPage(items, now))
    }
    if (first === "overview" && segments.length === 1) {
      const [counts, stats] = yield* Effect.all([inspection.overview, (yield* OperatorStats).stats(30)], { concurrency: 2 })
      return page("Overview", overviewPage(counts, stats))
    }
    if (first === "search" && segments.length === 1) {
      const q = (url.searchParams.get("q") ?? "").trim().slice(0, 128)
      const hits = yield* (yield* Search).find(q)
      // One hit, or one hit that is the id itself (an agent id also names its registration payment): open it.
      const exact = hits.filter((h) => h.id === q || h.id === q.toLowerCase())
      const only = hits.length === 1 ? hits[0] : exact.length === 1 ? exact[0] : undefined
      if (only !== undefined) return { _tag: "Redirect", location: hitPath(only) } satisfies View
      return page(q === "" ? "Search" : `Search: ${q}`, searchPage(q, hits, now), q !== "" && hits.length === 0 ? 404 : 200)
    }
    if (first === "agents" && segments.length === 2) {
      const found = yield* (yield* AgentView).view(second ?? "")
      if (Option.isNone(found)) return message(404, "Not found", `no agent ${second}`)
      return page(`agent ${found.value.agent.name}`, agentPage(found.value, now))
    }
    if (first === "actions" && segments.length === 1) {
      const listed = yield* Effect.either((yield* OperatorLog).list({ limit: OPERATOR_PAGE_DEFAULT, cursor: url.searchParams.get("cursor") ?? undefined }))
      if (Either.isLeft(listed)) return badCursor()
      return page("Operator actions", actionsPage(listed.right.actions, listed.right.pagination.nextCursor, now))
    }
    if (first === "machines" && (segments.length === 2 || segments.length === 3)) {
      const kind = decodeKind(second)
      if (Either.isLeft(kind)) return message(404, "Not found", "no such machine kind")
      if (segments.length === 2) {
        const state = url.searchParams.get("state") ?? undefined
        const cursor = url.searchParams.get("cursor") ?? undefined
        const [listed, counts] = yield* Effect.all([
          Effect.either(inspection.list(kind.right, { state: state?.slice(0, 64), limit: OPERATOR_PAGE_DEFAULT, cursor: cursor?.slice(0, 512) })),
          inspection.counts(kind.right)
        ])
        if (Either.isLeft(listed)) return badCursor()
        return page(`${kind.right}${state === undefined ? "" : ` in ${state}`}`, listPage(listed.right, counts, cursor, now))
      }
      const id = third ?? ""
      const [actor, history] = yield* Effect.all([
        inspection.actor(kind.right, id),
        Effect.either(inspection.history(kind.right, id, { limit: HISTORY_PAGE, cursor: url.searchParams.get("history")?.slice(0, 512) }))
      ])
      if (Either.isLeft(history)) return badCursor()
      if (Option.isNone(actor) || Option.isNone(history.right)) return message(404, "Not found", `no ${kind.right} ${id}`)
      const shown: View = { _tag: "Page", status: 200, title: `${kind.right} ${id}`, body: actorPage(actor.value, history.right.value, csrf, flash, now), flashShown: flash !== undefined }
      return shown
    }
    return message(404, "Not found", "no such page")
  })
