// The outbound address policy on every address form an attacker can write: literals, WHATWG-normalised hosts, IPv4 inside IPv6, transition and special ranges.
import { describe, expect, it } from "@effect/vitest"
import { addressRefusal, hostOf, isPrivateAddress } from "../../layers/UrlGuard.js"

/** The address a URL's host is connected to, as the WHATWG parser (and so undici) sees it. */
const literalOf = (url: string) => hostOf(new URL(url))

describe("outbound address classification", () => {
  const refused: ReadonlyArray<readonly [string, string]> = [
    // IPv4 special ranges
    ["0.0.0.0", "unspecified"],
    ["0.1.2.3", "unspecified"],
    ["10.0.0.5", "private"],
    ["172.16.3.4", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["169.254.0.1", "linkLocal"],
    ["169.254.169.254", "linkLocal"], // AWS, GCP, Azure, DigitalOcean metadata
    ["100.64.0.1", "carrierGradeNat"],
    ["100.100.100.200", "carrierGradeNat"], // Alibaba metadata
    ["192.0.0.192", "reserved"], // Oracle metadata
    ["192.0.2.1", "reserved"],
    ["198.18.0.1", "reserved"],
    ["198.51.100.7", "reserved"],
    ["203.0.113.9", "reserved"],
    ["240.0.0.1", "reserved"],
    ["255.255.255.255", "broadcast"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["168.63.129.16", "cloud provider internal"], // Azure wire server
    // IPv6 special ranges
    ["::", "unspecified"],
    ["::1", "loopback"],
    ["fe80::1", "linkLocal"],
    ["fe80::1%eth0", "linkLocal"],
    ["febf::1", "linkLocal"],
    ["fc00::1", "uniqueLocal"],
    ["fd00::1", "uniqueLocal"],
    ["fd00:ec2::254", "uniqueLocal"], // AWS metadata over IPv6
    ["fec0::1", "deprecatedSiteLocal"],
    ["feff::1", "deprecatedSiteLocal"],
    ["ff02::1", "multicast"],
    ["ff05::1:3", "multicast"],
    ["100::1", "discard"],
    ["2001:db8::1", "reserved"],
    ["3fff::1", "reserved"],
    ["5f00::1", "segmentRouting"],
    ["4000::1", "not global unicast"],
    ["::7f00:1", "not global unicast"], // deprecated IPv4-compatible ::127.0.0.1
    ["::127.0.0.1", "not global unicast"], // ipaddr.js alone would read this as IPv4-mapped
    ["::8.8.8.8", "not global unicast"], // how Node prints an IPv4-compatible answer: not the mapped ::ffff:8.8.8.8
    // IPv4 carried inside IPv6
    ["::ffff:127.0.0.1", "ipv4Mapped of loopback"],
    ["::ffff:7f00:1", "ipv4Mapped of loopback"],
    ["::ffff:10.0.0.1", "ipv4Mapped of private"],
    ["::ffff:169.254.169.254", "ipv4Mapped of linkLocal"],
    ["::ffff:0:7f00:1", "rfc6145 of loopback"], // IPv4-translated
    ["::ffff:0:10.1.2.3", "rfc6145 of private"],
    ["64:ff9b::7f00:1", "rfc6052 of loopback"], // well-known NAT64 prefix
    ["64:ff9b::169.254.169.254", "rfc6052 of linkLocal"],
    ["64:ff9b:1::808:808", "rfc6052"], // local-use NAT64: refused whatever it embeds
    ["2002:7f00:1::1", "6to4"], // 6to4 of 127.0.0.1
    ["2002:808:808::1", "6to4"], // 6to4 of a public address: refused too
    ["2001::1", "teredo"],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "teredo"],
    // not an address at all
    ["not-an-ip", "not an IP address"],
    ["localhost", "not an IP address"],
    ["", "not an IP address"],
    ["0177.0.0.1", "not an IP address"], // only normalised literals reach the check (see the URL forms below)
    ["2130706433", "not an IP address"]
  ]

  for (const [address, why] of refused) {
    it(`refuses ${address || "(empty)"} (${why})`, () => {
      expect(addressRefusal(address)).toBe(why)
      expect(isPrivateAddress(address)).toBe(true)
    })
  }

  const accepted = [
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "100.63.255.255", // just below CGNAT
    "100.128.0.1", // just above CGNAT
    "172.15.255.255",
    "172.32.0.1",
    "169.253.255.255",
    "223.255.255.254",
    "2606:4700:4700::1111",
    "2a00:1450:4001:81b::200e",
    "2001:4860:4860::8888",
    "::ffff:8.8.8.8", // mapped public IPv4
    "::ffff:0:808:808", // translated public IPv4
    "64:ff9b::808:808" // DNS64 answer for a public IPv4-only name
  ]
  for (const address of accepted) {
    it(`accepts the public address ${address}`, () => {
      expect(addressRefusal(address)).toBeUndefined()
      expect(isPrivateAddress(address)).toBe(false)
    })
  }
})

describe("URL host forms the WHATWG parser normalises before the check", () => {
  const forms: ReadonlyArray<readonly [string, string]> = [
    ["http://2130706433/", "127.0.0.1"], // decimal
    ["http://0x7f000001/", "127.0.0.1"], // hex
    ["http://0x7f.0x0.0x0.0x1/", "127.0.0.1"], // hex per part
    ["http://0177.0.0.1/", "127.0.0.1"], // octal
    ["http://017700000001/", "127.0.0.1"], // octal whole
    ["http://127.1/", "127.0.0.1"], // short form
    ["http://127.0.1/", "127.0.0.1"],
    ["http://0/", "0.0.0.0"],
    ["http://10.1/", "10.0.0.1"],
    ["http://169.254.43518/", "169.254.169.254"],
    ["http://0xa9fea9fe/", "169.254.169.254"],
    ["http://[::ffff:127.0.0.1]/", "::ffff:7f00:1"],
    ["http://[::ffff:0:7f00:1]/", "::ffff:0:7f00:1"],
    ["http://[0:0:0:0:0:ffff:7f00:1]/", "::ffff:7f00:1"],
    ["http://[fec0::1]/", "fec0::1"],
    ["http://[64:ff9b::127.0.0.1]/", "64:ff9b::7f00:1"],
    ["http://[2002:7f00:1::]/", "2002:7f00:1::"],
    ["http://[::1]:8080/x", "::1"],
    ["http://[fd00:ec2::254]/latest/meta-data", "fd00:ec2::254"]
  ]
  for (const [url, literal] of forms) {
    it(`${url} is checked as ${literal} and refused`, () => {
      expect(literalOf(url)).toBe(literal)
      expect(isPrivateAddress(literalOf(url))).toBe(true)
    })
  }

  it("a public literal in any form passes", () => {
    for (const url of ["http://134744072/", "http://0x08080808/", "http://8.8.2056/", "http://[2606:4700:4700::1111]/"]) {
      expect(isPrivateAddress(literalOf(url)), url).toBe(false)
    }
  })

  it("a host name is not a literal: it is resolved and each address checked (see the integration tests)", () => {
    expect(literalOf("http://example.com/")).toBe("example.com")
    expect(addressRefusal(literalOf("http://example.com/"))).toBe("not an IP address")
  })
})
