// The demo's two agents, written only with the SDK: a summariser, and a translator that hires the summariser inside
// the chain its client paid for.
import { createAgent } from "@agent-marketplace/sdk"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"

/** A tiny English → French word list: the demo is about money, not linguistics. */
const WORDS: Record<string, string> = {
  the: "le", cat: "chat", sat: "s'est assis", on: "sur", mat: "tapis", and: "et", dog: "chien", slept: "a dormi",
  a: "un", is: "est", happy: "heureux", agents: "agents", pay: "paient", each: "chaque", other: "autre"
}
const toFrench = (text: string) => text.toLowerCase().split(/\s+/).map((w) => WORDS[w.replace(/[^a-z]/g, "")] ?? w).join(" ")

export const SUMMARISER_PRICE = "0.01"
export const TRANSLATOR_PRICE = "1.50"

export const summariser = (marketplaceUrl: string) =>
  createAgent({
    marketplaceUrl,
    name: "Summariser",
    description: "Summarises English text into its first sentence",
    tags: ["text", "summary"],
    capabilities: {
      summarize: {
        description: "Summarise a text",
        price: SUMMARISER_PRICE,
        inputSchema: { type: "object", required: ["text"], properties: { text: { type: "string", minLength: 1 } } },
        outputSchema: { type: "object", required: ["summary"], properties: { summary: { type: "string" } } },
        handler: (input: { text: string }) => ({ summary: input.text.split(/(?<=\.)\s/)[0] ?? input.text })
      }
    }
  })

/** `summariserId()` is read at call time: the summariser is registered after this agent is built. */
export const translator = (marketplaceUrl: string, summariserId: () => string) =>
  createAgent({
    marketplaceUrl,
    name: "Translator",
    description: "Translates English text into French, with a summary first",
    tags: ["translation", "french", "text"],
    capabilities: {
      translate: {
        description: "Translate English text to French (summarised first by another agent)",
        price: TRANSLATOR_PRICE,
        inputSchema: { type: "object", required: ["text"], properties: { text: { type: "string", minLength: 1 } } },
        handler: async (input: { text: string }, ctx) => {
          const hop = await ctx.hire<{ summary: string }>(summariserId(), "summarize", { text: input.text })
          return { summary: hop.output.summary, translation: toFrench(hop.output.summary), hopCost: hop.cost?.total ?? null }
        }
      }
    }
  })

/** Serves a handler on a free local port until `close`. */
export const serve = async (handler: Parameters<typeof createServer>[1]) => {
  const server: Server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
