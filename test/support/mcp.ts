// MCP clients in tests: a session of the official SDK client against the test server, ended with the test's scope.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect } from "effect"
import { TestEnv } from "./harness.js"

/** An MCP client in a session of its own, ended (DELETE) with the test's scope. */
export const mcpSession = (name: string) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.acquireRelease(
      Effect.promise(async () => {
        const client = new Client({ name, version: "1.0.0" })
        const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`))
        await client.connect(transport)
        return { client, transport }
      }),
      ({ client, transport }) => Effect.promise(async () => {
        await transport.terminateSession().catch(() => undefined)
        await client.close()
      })
    ))
