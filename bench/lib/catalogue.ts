// A large synthetic catalogue for the discovery benchmark: agents built from the ranking fixture's vocabulary
// (names, descriptions, tags, capabilities mixed and varied), deterministic for a seed.
import { agents as fixture, type FixtureAgent } from "../../test/fixtures/catalogue/agents.js"

/** mulberry32: a small deterministic PRNG (uniform in [0, 1)). */
export const prng = (seed: number) => {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const VENDORS = [
  "Acme", "Nova", "Blue", "Quantum", "Swift", "Atlas", "Orbit", "Pixel", "Cedar", "Harbor", "Summit", "Vector", "Nimbus",
  "Echo", "Falcon", "Granite", "Helix", "Iris", "Juno", "Kite", "Lumen", "Maple", "Nexus", "Onyx", "Prism", "Quill",
  "Raven", "Sierra", "Tidal", "Umbra", "Vertex", "Willow", "Xenon", "Yarrow", "Zephyr", "Apex", "Beacon", "Cobalt",
  "Delta", "Ember", "Fjord", "Glacier", "Horizon", "Indigo", "Jade", "Krypton", "Lotus", "Mosaic", "Nomad", "Opal"
]
const SUFFIXES = ["", "", "", " Pro", " Lite", " Plus", " Cloud", " Express", " AI", " Studio", " Labs", " Go", " Max", " One"]
const EXTRA_SENTENCES = [
  "Runs in the EU and the US.", "Answers in under a second.", "Built for developers and small teams.",
  "Supports batch requests.", "Trained on public and licensed data.", "Includes a free tier for testing.",
  "Enterprise support available.", "Open-source core with a hosted API.", "Privacy first: no data retained.",
  "Popular with startups and agencies."
]
const MODELS = ["per-request", "per-request", "per-request", "per-token", "per-minute", "dynamic"] as const

const pick = <A>(random: () => number, items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)] as A
const sentences = (text: string) => text.split(/(?<=[.!?])\s+/u).filter((s) => s.length > 0)
const allTags = [...new Set(fixture.flatMap((a) => a.tags))]

/** Price jittered ×0.5-×2, at least 0.0001, 6 decimals. */
const jitter = (random: () => number, price: string) => {
  const micros = Math.max(100, Math.round(Number(price) * 1_000_000 * (0.5 + 1.5 * random())))
  return (micros / 1_000_000).toFixed(6)
}

/** Agent number `i` of the synthetic catalogue. */
export const syntheticAgent = (random: () => number, i: number): FixtureAgent => {
  const base = fixture[i % fixture.length] as FixtureAgent
  const other = pick(random, fixture)
  const name = `${pick(random, VENDORS)} ${base.name}${pick(random, SUFFIXES)}`.slice(0, 100)
  const description = [base.description, pick(random, sentences(other.description)), random() < 0.5 ? pick(random, EXTRA_SENTENCES) : ""]
    .filter((s) => s.length > 0)
    .join(" ")
    .slice(0, 1000)
  const tags = [...new Set([...base.tags, ...(random() < 0.3 ? [pick(random, allTags)] : [])])].slice(0, 10)
  const capabilities = base.capabilities.map((c) => ({
    ...c,
    price: jitter(random, c.price),
    model: pick(random, MODELS)
  }))
  const roll = random()
  const status = roll < 0.03 ? "inactive" : roll < 0.05 ? "suspended" : "active"
  // Reputation around 60 (sum of uniforms), health mostly high with a sick tail.
  const reputation = Math.max(0, Math.min(100, Math.round(20 + 80 * ((random() + random() + random()) / 3))))
  const health = random() < 0.06 ? Math.round(random() * 30) / 100 : Math.round((0.6 + 0.4 * random()) * 1000) / 1000
  return { key: `syn-${i}`, name, description, tags, capabilities, reputation, health, chain: random() < 0.4, status }
}
