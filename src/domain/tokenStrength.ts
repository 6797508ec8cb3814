// How strong a secret token is, estimated from its own characters: the rule OPERATOR_TOKEN must meet outside the devnet.

/** Fewest characters a token may have outside the devnet. */
export const STRONG_TOKEN_MIN_CHARS = 32
/** Fewest estimated bits of entropy a token may have outside the devnet. */
export const STRONG_TOKEN_MIN_BITS = 128
/** Longest token accepted anywhere: a longer offered token is refused without hashing it. */
export const MAX_TOKEN_CHARS = 1024

/**
 * Estimated entropy in bits: the Shannon entropy of the token's own character frequencies, per character, times the
 * number of characters that start a new stretch (distinct three-character windows, plus two), so a repeated stretch
 * counts once ("aaaa…" is 0 bits, "abcdabcd…" a dozen). A random token scores about its true entropy; a dictionary phrase
 * can still pass, which is why the recommended token is random (`openssl rand -base64 32`: 190 bits or more here).
 */
export const estimatedBits = (token: string): number => {
  const chars = Array.from(token)
  const counts = new Map<string, number>()
  for (const c of chars) counts.set(c, (counts.get(c) ?? 0) + 1)
  let perChar = 0
  for (const n of counts.values()) {
    const p = n / chars.length
    perChar -= p * Math.log2(p)
  }
  const windows = new Set<string>()
  for (let i = 0; i + 3 <= chars.length; i++) windows.add(chars.slice(i, i + 3).join(""))
  return Math.min(chars.length, windows.size + 2) * perChar
}

/** Why `token` is too weak outside the devnet, or undefined when it is strong enough. */
export const tokenWeakness = (name: string, token: string): string | undefined => {
  const length = Array.from(token).length
  const bits = Math.floor(estimatedBits(token))
  if (length >= STRONG_TOKEN_MIN_CHARS && bits >= STRONG_TOKEN_MIN_BITS && length <= MAX_TOKEN_CHARS) return undefined
  return `${name} is too weak outside the devnet: it needs ${STRONG_TOKEN_MIN_CHARS} to ${MAX_TOKEN_CHARS} characters and about ${STRONG_TOKEN_MIN_BITS} bits of entropy (this one has ${length} characters, about ${bits} bits); generate one with: openssl rand -base64 32`
}
