// Money at the edge: decimal USDC strings <-> integer micro-USDC (bigint) inside the code.
import { Option, ParseResult, Schema } from "effect"

/** One USDC in micro-USDC (6 decimals, the token's atomic unit). */
export const MICROS_PER_USDC = 1_000_000n

const DECIMAL = /^(0|[1-9]\d{0,11})(?:\.(\d{1,6}))?$/

/** Parses "12.5" into 12_500_000n; more than 6 decimals, signs, exponents or junk give None. */
export const parseUsdc = (input: string): Option.Option<bigint> => {
  const match = DECIMAL.exec(input)
  if (match === null) return Option.none()
  const whole = BigInt(match[1] ?? "0")
  const fraction = BigInt((match[2] ?? "").padEnd(6, "0"))
  return Option.some(whole * MICROS_PER_USDC + fraction)
}

/** Formats micro-USDC as a decimal string with exactly 6 places ("0.100000"); negative amounts keep their sign. */
export const formatUsdc = (micros: bigint): string => {
  const negative = micros < 0n
  const abs = negative ? -micros : micros
  const whole = abs / MICROS_PER_USDC
  const fraction = (abs % MICROS_PER_USDC).toString().padStart(6, "0")
  return `${negative ? "-" : ""}${whole}.${fraction}`
}

/** A non-negative USDC amount: a decimal string on the wire, micro-USDC bigint in code. */
export const Usdc = Schema.transformOrFail(
  Schema.String.annotations({ examples: ["0.100000"] }),
  Schema.BigIntFromSelf,
  {
    strict: true,
    decode: (input, _, ast) =>
      Option.match(parseUsdc(input), {
        onNone: () =>
          ParseResult.fail(
            new ParseResult.Type(ast, input, "must be a decimal USDC amount with at most 6 decimal places, e.g. \"0.10\"")
          ),
        onSome: ParseResult.succeed
      }),
    encode: (micros) => ParseResult.succeed(formatUsdc(micros))
  }
).annotations({ identifier: "Usdc", description: "USDC amount as a decimal string (up to 6 decimal places)" })

/** Basis points of the agent fee the platform keeps (15%). */
export const PLATFORM_CUT_BPS = 1_500n

/** Splits an agent fee into the platform cut and the agent's earnings, rounding the cut down so the agent is never short-changed by rounding. */
export const splitAgentFee = (agentFee: bigint): { readonly platformCut: bigint; readonly agentEarnings: bigint } => {
  const platformCut = (agentFee * PLATFORM_CUT_BPS) / 10_000n
  return { platformCut, agentEarnings: agentFee - platformCut }
}

export const REGISTRATION_FEE = 100_000n // 0.10 USDC
export const EXECUTION_PLATFORM_FEE = 1_000n // 0.001 USDC
export const MIN_BASE_PRICE = 100n // 0.0001 USDC
export const MAX_BASE_PRICE = 10_000n * MICROS_PER_USDC
