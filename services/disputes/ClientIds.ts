// Client ids: the X-Client-Id a payer gets with every paid execution, bound to its wallet by an HMAC so the service can
// check it without a lookup table, and nobody can make one for a wallet they did not pay from.
import { Effect, Option, Redacted } from "effect"
import { createHash, createHmac, timingSafeEqual } from "node:crypto"
import { AppConfig } from "../../layers/Config.js"

const FORMAT = /^cl_([0-9a-f]{40})_([A-Za-z0-9_-]{22})$/
/** The devnet's secret is public like its keys: ids made with it are worthless outside devnet, where it is refused. */
const DEVNET_SECRET = createHash("sha256").update("agent-marketplace devnet client ids").digest()

export class ClientIds extends Effect.Service<ClientIds>()("disputes/ClientIds", {
  effect: Effect.gen(function* () {
    const config = yield* AppConfig
    // Required outside devnet (layers/Config.ts refuses to start without it).
    const secret = Option.match(config.clientIdSecret, { onNone: () => DEVNET_SECRET, onSome: (s) => Buffer.from(Redacted.value(s)) })
    const tag = (wallet: string) => createHmac("sha256", secret).update(`x-client-id:v1:${wallet}`).digest().subarray(0, 16)

    /** The client id of a payer wallet (0x address, any case). */
    const issue = (wallet: string) => {
      const hex = wallet.toLowerCase().replace(/^0x/, "")
      return `cl_${hex}_${tag(`0x${hex}`).toString("base64url")}`
    }

    /** The payer wallet an id was issued to (lowercase 0x address), if it is one of ours. */
    const verify = (id: string | undefined): Option.Option<string> => {
      const match = id === undefined ? null : FORMAT.exec(id)
      if (match === null) return Option.none()
      const wallet = `0x${match[1]}`
      // Compared as text: base64url's padding bits would otherwise give each id 16 spellings.
      const given = Buffer.from(match[2] ?? "")
      const expected = Buffer.from(tag(wallet).toString("base64url"))
      return given.length === expected.length && timingSafeEqual(given, expected) ? Option.some(wallet) : Option.none()
    }
    return { issue, verify } as const
  })
}) {}
