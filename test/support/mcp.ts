// MCP clients in tests: the official SDK client against the test server (or any URL), closed with the test's scope.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect } from "effect"
import { TestEnv } from "./harness.js"

/** A connected MCP client of `url` (an /mcp endpoint), closed with the scope (ending its session if it was given one). */
export const mcpClient = (name: string, url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Client({ name, version: "1.0.0" })
      const transport = new StreamableHTTPClientTransport(new URL(url))
      await client.connect(transport)
      return { client, transport }
    }),
    ({ client, transport }) => Effect.promise(async () => {
      await transport.terminateSession().catch(() => undefined)
      await client.close()
    })
  )

/** A connected MCP client of the test server. */
export const mcpSession = (name: string) => Effect.flatMap(TestEnv, ({ baseUrl }) => mcpClient(name, `${baseUrl}/mcp`))
