// GET /openapi.json and GET /docs, each built on its first request and then kept. The OpenAPI document is derived from
// the API's definitions, and the Swagger page carries Swagger UI's ~2 MB script: bundled, that script alone made the
// idle service hold ~5 MiB (its text in the bundle's source and again as a string). It is loaded here at the first
// /docs from @effect/platform's own file in node_modules, the page is the one its HttpApiSwagger layer serves.
import { HttpApiBuilder, HttpServerResponse, OpenApi } from "@effect/platform"
import { Effect, Layer } from "effect"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { pathToFileURL } from "node:url"
import { Api } from "./Api.js"

/** The OpenAPI document's response, computed once. */
const openApiResponse = Effect.runSync(Effect.cached(Effect.suspend(() => HttpServerResponse.json(OpenApi.fromApi(Api))).pipe(Effect.orDie)))

/** Swagger UI's script and style, from the file @effect/platform's HttpApiSwagger bundles them in. */
const swaggerAssets = Effect.promise(async () => {
  const platform = dirname(createRequire(import.meta.url).resolve("@effect/platform/package.json"))
  // A computed specifier: the bundler leaves it to Node at run time.
  const assets: unknown = await import(pathToFileURL(join(platform, "dist", "esm", "internal", "httpApiSwagger.js")).href)
  if (typeof assets === "object" && assets !== null && "javascript" in assets && "css" in assets && typeof assets.javascript === "string" && typeof assets.css === "string") {
    return { javascript: assets.javascript, css: assets.css }
  }
  throw new Error("@effect/platform's Swagger UI assets are not where this version keeps them")
})

const escapeHtml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
/** JSON inside a <script> element: no `<` (no closing tag) and no U+2028/U+2029. */
const escapeJson = (value: unknown) =>
  JSON.stringify(value).replace(/</g, "\\u003c").replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"))

/** The Swagger page's response (as HttpApiSwagger.layer builds it), computed once. */
const docsResponse = Effect.runSync(Effect.cached(Effect.map(swaggerAssets, ({ css, javascript }) => {
  const spec = OpenApi.fromApi(Api)
  return HttpServerResponse.html(`<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8" />
  <meta name="viewport" content="width=device-width, initial-scale=1" />
  <title>${escapeHtml(spec.info.title)} Documentation</title>
  <style>${css}</style>
</head>
<body>
  <div id="swagger-ui"></div>
  <script id="swagger-spec" type="application/json">
    ${escapeJson(spec)}
  </script>
  <script>
    ${javascript}
    window.onload = () => {
      window.ui = SwaggerUIBundle({
        spec: JSON.parse(document.getElementById("swagger-spec").textContent),
        dom_id: '#swagger-ui',
      });
    };
  </script>
</body>
</html>`)
})))

/** Routes GET /openapi.json and GET /docs on the API's router. */
export const DocsLive: Layer.Layer<never> = HttpApiBuilder.Router.use((router) =>
  Effect.all([router.get("/openapi.json", openApiResponse), router.get("/docs", docsResponse)], { discard: true })
)
