// The MCP tool for an execution's status (free): output and cost only for whoever proves the payment, the rule of
// GET /api/v1/execute/:requestId (the Executions service applies it).
import { Effect, Schema } from "effect"
import { Executions } from "../../../services/executions/Executions.js"
import { ExecutionView } from "../../domain/Execution.js"
import { RequestIdPath } from "../../http/ExecutionApi.js"
import { defineTool } from "../Tool.js"

export const executionTools = Effect.gen(function* () {
  const executions = yield* Executions
  return [
    defineTool({
      name: "get_execution_status",
      title: "Execution status",
      description:
        "The status of an execution (pending, completed, failed, timeout, refunded), its settlement, attempts, retry window and refund. " +
        "The same rule as GET /api/v1/execute/:requestId: the output and cost are returned only with `payment`, the payment header value that paid for the execution (X-PAYMENT or PAYMENT-SIGNATURE: the X-PAYMENT-USED response header; for a call inside a chain its `chain.readHandle`, or the chain root's payment); without it a `message` says so. " +
        "Use it to poll an async execution or to fetch a result again. Free.",
      input: Schema.Struct({
        requestId: RequestIdPath.fields.requestId.annotations({ description: "The execution's requestId (req_…) or an async call's jobId (job_…)" }),
        payment: Schema.optional(
          Schema.String.pipe(Schema.minLength(1), Schema.maxLength(16_384)).annotations({
            description: "Proof of having paid: the exact X-PAYMENT or PAYMENT-SIGNATURE value used for this execution; unlocks output and cost"
          })
        )
      }),
      output: ExecutionView,
      run: ({ payment, requestId }) => executions.status(requestId, payment === undefined ? [] : [payment])
    })
  ]
})
