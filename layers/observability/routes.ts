// The route template of a request path ("/api/v1/agents/:id"), from an HttpApi's endpoints: a bounded label for metrics
// and logs whatever paths clients send.
import { HttpApi, type HttpApiGroup } from "@effect/platform"

interface Node {
  readonly statics: Map<string, Node>
  param: Node | undefined
  /** Method → template, for the routes ending here. */
  readonly routes: Map<string, string>
}

const node = (): Node => ({ statics: new Map(), param: undefined, routes: new Map() })

const segmentsOf = (path: string) => path.split("/").filter((s) => s !== "")

export interface RouteMatcher {
  /** The template of the route serving `method path` (HEAD as GET), or undefined for a path no route serves. */
  readonly match: (method: string, url: string) => string | undefined
}

/**
 * Static segments win over parameters (as in the router), with backtracking when a static branch dead-ends. `areas`:
 * path prefixes served outside the API (the console at /ops) whose unlisted paths take the area's template
 * (`/ops/*`) rather than "unmatched": still one bounded label.
 */
export const makeRouteMatcher = (
  routes: Iterable<readonly [method: string, template: string]>,
  areas: ReadonlyArray<readonly [prefix: string, template: string]> = []
): RouteMatcher => {
  const root = node()
  for (const [method, template] of routes) {
    let at = root
    for (const segment of segmentsOf(template)) {
      if (segment.startsWith(":")) at = at.param ??= node()
      else {
        const next = at.statics.get(segment) ?? node()
        at.statics.set(segment, next)
        at = next
      }
    }
    at.routes.set(method.toUpperCase(), template)
  }
  const find = (at: Node, segments: ReadonlyArray<string>, i: number, method: string): string | undefined => {
    if (i === segments.length) return at.routes.get(method) ?? (method === "HEAD" ? at.routes.get("GET") : undefined)
    const segment = segments[i] ?? ""
    const fixed = at.statics.get(segment)
    const viaStatic = fixed === undefined ? undefined : find(fixed, segments, i + 1, method)
    return viaStatic ?? (at.param === undefined ? undefined : find(at.param, segments, i + 1, method))
  }
  return {
    match: (method, url) => {
      const query = url.indexOf("?")
      const path = query === -1 ? url : url.slice(0, query)
      const segments = segmentsOf(path)
      // A path longer than any route is not one of ours (and is not walked segment by segment).
      const found = segments.length > 16 ? undefined : find(root, segments, 0, method.toUpperCase())
      return found ?? areas.find(([prefix]) => path === prefix || path.startsWith(`${prefix}/`))?.[1]
    }
  }
}

/** Every endpoint of `api`, plus routes served beside it (docs, metrics). */
export const apiRoutes = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(
  api: HttpApi.HttpApi<Id, Groups, E, R>,
  extra: ReadonlyArray<readonly [string, string]> = []
) => {
  const routes: Array<readonly [string, string]> = [...extra]
  HttpApi.reflect(api, {
    onGroup: () => undefined,
    onEndpoint: ({ endpoint }) => void routes.push([endpoint.method, endpoint.path])
  })
  return routes
}
