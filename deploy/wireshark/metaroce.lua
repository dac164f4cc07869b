-- metaroce.lua: a Wireshark dissector for MetaRoCE version 1, the RDMA
-- transport over UDP that docs/spec.md specifies. Every packet of the spec:
-- the common prefix (§3), data and PROBE (§4), ACK with its SACK bitmap as
-- ranges of path sequence numbers (§5), NACK (§6), the connection-management
-- packets (§7). The CRC32C trailer (§3.4) is computed and flagged when wrong,
-- and the receive checks of §3.5 (the same ones wire.Parse makes) are run, so
-- a packet a receiver would drop carries expert info naming the drop reason
-- (short, version, opcode, crc, reserved, length, field).
--
-- Load it with `wireshark -X lua_script:metaroce.lua` or put it in a Lua
-- plugin directory (`make install` does; Help > About > Folders names
-- them). It dissects UDP port 4792 (spec §2.2) and the port of the
-- preference "MetaRoCE UDP port" (Edit > Preferences > Protocols > MetaRoCE,
-- or `-o metaroce.port:N`). `-o metaroce.check_crc:FALSE` skips the CRC32C
-- (status Unverified), for captures too large to wait for.
--
-- Display-filter fields are named after the spec's fields in snake_case, as
-- the test vectors of §12 name them: metaroce.psn, metaroce.path_id,
-- metaroce.path_seq, metaroce.cum_psn, metaroce.sack.arrived, ... Short
-- aliases: metaroce.conn (every connection id the packet carries, DstConn
-- and SrcConn), metaroce.path, metaroce.pathseq, metaroce.retx. `metaroce
-- decode` (internal/decode) prints the same fields from the Go codecs, and a
-- test compares the two on every packet of a capture.
--
-- Written for the Lua 5.2 of Wireshark 3.x and 4.0 (bit32) and later
-- versions (native bitwise operators); no build step.

local VERSION = 1
local DEFAULT_PORT = 4792

local p = Proto("metaroce", "MetaRoCE")

-- §3.2
local opcodes = {
  [0x01] = "WRITE", [0x02] = "WRITE_IMM", [0x03] = "SEND", [0x04] = "SEND_IMM",
  [0x05] = "READ_REQ", [0x06] = "READ_RESP", [0x07] = "PROBE",
  [0x10] = "ACK", [0x11] = "NACK",
  [0x20] = "CONNECT", [0x21] = "CHALLENGE", [0x22] = "ACCEPT", [0x23] = "REJECT",
  [0x24] = "DISCONNECT", [0x25] = "DISCONNECT_ACK", [0x26] = "RESET",
}
-- §6.2
local nack_reasons = {
  [1] = "REMOTE_ACCESS", [2] = "RNR", [3] = "INVALID_REQUEST", [4] = "OUT_OF_WINDOW",
  [5] = "UNSUPPORTED_VERSION", [6] = "SEQUENCE",
}
-- §7.5
local conn_reasons = {
  [0] = "NONE", [1] = "NO_SERVICE", [2] = "BAD_COOKIE", [3] = "PARAMS",
  [4] = "UNKNOWN_CONN", [5] = "LIMIT", [6] = "CLOSED", [7] = "FAILED", [8] = "APPLICATION",
}
local crc_status = { [0] = "Bad", [1] = "Good", [2] = "Unverified" }

-- Fixed header size per class (§3.4), including the prefix.
local DATA_LEN, ACK_LEN, NACK_LEN, CONN_LEN, TRAILER = 64, 80, 40, 84, 4
-- Private data bound of CONNECT, ACCEPT and REJECT (§7.1).
local MAX_PRIVATE = 64

local function class_of(op)
  if op >= 0x01 and op <= 0x07 then return "data", DATA_LEN end
  if op == 0x10 then return "ack", ACK_LEN end
  if op == 0x11 then return "nack", NACK_LEN end
  if op >= 0x20 and op <= 0x26 then return "conn", CONN_LEN end
  return nil, nil
end

local F = ProtoField
local f = {
  version = F.uint8("metaroce.version", "Version"),
  opcode = F.uint8("metaroce.opcode", "Opcode", base.HEX, opcodes),
  flags = F.uint16("metaroce.flags", "Flags", base.HEX),
  ack_req = F.bool("metaroce.flags.ack_req", "ACK_REQ", 16, nil, 0x0001),
  retx_flag = F.bool("metaroce.flags.retx", "RETX", 16, nil, 0x0002),
  void = F.bool("metaroce.flags.void", "VOID", 16, nil, 0x0004),
  flags_rsvd = F.uint16("metaroce.flags.reserved", "Reserved", base.HEX, nil, 0xfff8),
  dst_conn = F.uint32("metaroce.dst_conn", "DstConn", base.HEX),
  -- data (§4.1)
  psn = F.uint32("metaroce.psn", "PSN", base.HEX),
  path_id = F.uint16("metaroce.path_id", "PathID"),
  stream = F.uint16("metaroce.stream", "Stream"),
  path_seq = F.uint32("metaroce.path_seq", "PathSeq"),
  msg_id = F.uint32("metaroce.msg_id", "MsgID"),
  stream_seq = F.uint32("metaroce.stream_seq", "StreamSeq"),
  offset = F.uint32("metaroce.offset", "Offset"),
  msg_len = F.uint32("metaroce.msg_len", "MsgLen"),
  payload_len = F.uint16("metaroce.payload_len", "PayloadLen"),
  timestamp = F.uint64("metaroce.timestamp", "Timestamp (ns)"),
  remote_addr = F.uint64("metaroce.remote_addr", "RemoteAddr", base.HEX),
  recv_seq = F.uint32("metaroce.recv_seq", "RecvSeq"),
  rkey = F.uint32("metaroce.rkey", "RKey", base.HEX),
  imm = F.uint32("metaroce.imm", "Imm", base.HEX),
  payload = F.bytes("metaroce.payload", "Payload"),
  reserved = F.bytes("metaroce.reserved", "Reserved"),
  -- ack (§5.1)
  cum_psn = F.uint32("metaroce.cum_psn", "CumPSN", base.HEX),
  ce_count = F.uint16("metaroce.ce_count", "CECount"),
  path_ack_seq = F.uint32("metaroce.path_ack_seq", "PathAckSeq"),
  echo_psn = F.uint32("metaroce.echo_psn", "EchoPSN", base.HEX),
  echo_timestamp = F.uint64("metaroce.echo_timestamp", "EchoTimestamp (ns)"),
  rate_hint = F.uint32("metaroce.rate_hint", "RateHint (Mb/s)"),
  credit = F.uint32("metaroce.credit", "Credit (packets)"),
  sack = F.bytes("metaroce.sack", "SACK"),
  sack_arrived = F.string("metaroce.sack.arrived", "Arrived path sequences"),
  sack_missing = F.string("metaroce.sack.missing", "Missing path sequences"),
  sack_count = F.uint16("metaroce.sack.count", "Path sequences arrived (of 256)"),
  ack_delay = F.uint32("metaroce.ack_delay", "AckDelay (ns)"),
  -- nack (§6.1)
  nack_reason = F.uint8("metaroce.nack_reason", "Reason", base.DEC, nack_reasons),
  info = F.uint32("metaroce.info", "Info"),
  -- conn (§7.1)
  src_conn = F.uint32("metaroce.src_conn", "SrcConn", base.HEX),
  initial_psn = F.uint32("metaroce.initial_psn", "InitialPSN", base.HEX),
  service = F.uint32("metaroce.service", "Service"),
  recv_window = F.uint32("metaroce.recv_window", "RecvWindow (packets)"),
  max_payload = F.uint16("metaroce.max_payload", "MaxPayload"),
  msg_window = F.uint16("metaroce.msg_window", "MsgWindow"),
  conn_reason = F.uint16("metaroce.conn_reason", "Reason", base.DEC, conn_reasons),
  paths = F.uint16("metaroce.paths", "Paths"),
  cookie = F.bytes("metaroce.cookie", "Cookie"),
  token = F.uint64("metaroce.token", "Token", base.HEX),
  reset_token = F.bytes("metaroce.reset_token", "ResetToken"),
  app_reason = F.uint16("metaroce.app_reason", "AppReason"),
  private_len = F.uint16("metaroce.private_len", "PrivateLen"),
  private = F.bytes("metaroce.private", "PrivateData"),
  plane_addrs = F.uint16("metaroce.plane_addrs", "PlaneAddrs"),
  planes = F.bytes("metaroce.planes", "Plane addresses"),
  -- trailer (§3.4)
  crc = F.uint32("metaroce.crc", "CRC32C", base.HEX),
  crc_status = F.uint8("metaroce.crc.status", "CRC32C status", base.DEC, crc_status),
  crc_computed = F.uint32("metaroce.crc.computed", "CRC32C computed", base.HEX),
  -- §3.5: why a receiver drops the packet
  drop = F.string("metaroce.drop", "Dropped by a receiver"),
  -- aliases for filtering (hidden)
  conn = F.uint32("metaroce.conn", "Connection id", base.HEX),
  path = F.uint16("metaroce.path", "Path"),
  pathseq = F.uint32("metaroce.pathseq", "Path sequence"),
  retx = F.bool("metaroce.retx", "Retransmission"),
}
local fl = {}
for _, v in pairs(f) do fl[#fl + 1] = v end
p.fields = fl

local ex = {
  crc = ProtoExpert.new("metaroce.crc.bad", "Bad CRC32C", expert.group.CHECKSUM, expert.severity.ERROR),
  drop = ProtoExpert.new("metaroce.malformed", "Malformed MetaRoCE packet", expert.group.MALFORMED, expert.severity.ERROR),
  trunc = ProtoExpert.new("metaroce.truncated", "Packet truncated by the capture (snap length): CRC32C not verified; capture with -s 0",
    expert.group.UNDECODED, expert.severity.NOTE),
  retx = ProtoExpert.new("metaroce.retransmission", "Retransmission", expert.group.SEQUENCE, expert.severity.NOTE),
  nack = ProtoExpert.new("metaroce.nack", "NACK", expert.group.RESPONSE_CODE, expert.severity.WARN),
  reset = ProtoExpert.new("metaroce.reset", "Connection reset or refused", expert.group.RESPONSE_CODE, expert.severity.WARN),
}
p.experts = { ex.crc, ex.drop, ex.trunc, ex.retx, ex.nack, ex.reset }

p.prefs.port = Pref.uint("MetaRoCE UDP port", DEFAULT_PORT,
  "A second UDP destination port to dissect as MetaRoCE (4792 is always registered)")
p.prefs.check_crc = Pref.bool("Verify CRC32C", true,
  "Compute each packet's CRC32C and flag a mismatch (off: status Unverified, faster on huge captures)")

-- Bitwise operations: bit32 on Lua 5.2; the native operators, compiled at
-- load time so that Lua 5.2 never parses them, on 5.3 and later.
local band, bxor, rshift
if bit32 then
  band, bxor, rshift = bit32.band, bit32.bxor, bit32.rshift
else
  band, bxor, rshift = load([[return
    function(a, b) return a & b end,
    function(a, b) return (a ~ b) & 0xffffffff end,
    function(a, n) return (a & 0xffffffff) >> n end]])()
end

-- CRC32C (Castagnoli, reflected polynomial 0x82F63B78, init and final XOR
-- 0xFFFFFFFF), table-driven (§3.4).
local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if band(c, 1) ~= 0 then c = bxor(rshift(c, 1), 0x82F63B78) else c = rshift(c, 1) end
  end
  crc_table[i] = c
end
local sbyte = string.byte
local function crc32c(tvb, off, len)
  local c = 0xFFFFFFFF
  local bytes = tvb:raw(off, len)
  -- string.byte 64 bytes at a time: one call into C per 64 bytes. The
  -- loop costs about 60 ns a byte in Lua 5.2, 0.1 ms for a full data
  -- packet; the preference "Verify CRC32C" turns it off for captures of
  -- millions of packets.
  for i = 1, len, 64 do
    local chunk = { sbyte(bytes, i, math.min(i + 63, len)) }
    for j = 1, #chunk do
      c = bxor(crc_table[band(bxor(c, chunk[j]), 0xff)], rshift(c, 8))
    end
  end
  return bxor(c, 0xFFFFFFFF)
end

local function u8(tvb, o) return tvb(o, 1):uint() end
local function u16(tvb, o) return tvb(o, 2):uint() end
local function u32(tvb, o) return tvb(o, 4):uint() end
local function zero(tvb, o, n)
  for i = 0, n - 1 do if tvb(o + i, 1):uint() ~= 0 then return false end end
  return true
end
local function u64zero(tvb, o) return zero(tvb, o, 8) end

local function is_pow2(v) return v ~= 0 and band(v, v - 1) == 0 end

-- The SACK bitmap as ranges of path sequence numbers, oldest first: bit i
-- set means PathAckSeq - i arrived (§5.1). Missing ranges are the holes
-- between the oldest arrival the bitmap shows and PathAckSeq.
local function sack_ranges(tvb, o, top)
  local bits = {}
  local oldest = -1
  for i = 0, 255 do
    local b = tvb(o + math.floor(i / 8), 1):uint()
    local set = band(rshift(b, i % 8), 1) == 1
    bits[i] = set
    if set then oldest = i end
  end
  local function seq(i) return (top - i) % 4294967296 end
  local function fmt(a, b) if a == b then return string.format("%u", seq(a)) end return string.format("%u-%u", seq(a), seq(b)) end
  local arrived, missing, count = {}, {}, 0
  local i = oldest
  while i >= 0 do
    local j = i
    while j - 1 >= 0 and bits[j - 1] == bits[i] do j = j - 1 end
    if bits[i] then
      arrived[#arrived + 1] = fmt(i, j)
      count = count + (i - j + 1)
    else
      missing[#missing + 1] = fmt(i, j)
    end
    i = j - 1
  end
  return arrived, missing, count
end

-- The class rules of §4.1.1, §5.1, §6.1 and §7.1, in the order wire.Parse
-- checks them; returns the drop reason or nil.
local function validate(tvb, cls, op, flags, n)
  if cls == "data" then
    local pl = u16(tvb, 36)
    if pl ~= n - DATA_LEN - TRAILER then return "length" end
    if u32(tvb, 28) + pl > u32(tvb, 32) then return "length" end
    if u16(tvb, 38) ~= 0 then return "reserved" end
    local void = band(flags, 4) ~= 0
    if void and pl ~= 0 then return "field" end
    if op ~= 0x02 and op ~= 0x04 and u32(tvb, 60) ~= 0 then return "field" end
    if op == 0x07 then
      if pl ~= 0 or void or u32(tvb, 8) ~= 0 or u16(tvb, 14) ~= 0 or u32(tvb, 20) ~= 0 or
        u32(tvb, 24) ~= 0 or u32(tvb, 28) ~= 0 or u32(tvb, 32) ~= 0 or not u64zero(tvb, 48) or
        u32(tvb, 56) ~= 0 then
        return "field"
      end
    elseif op == 0x05 then
      if pl ~= 0 or u32(tvb, 28) ~= 0 then return "field" end
    elseif op == 0x03 or op == 0x04 then
      if u32(tvb, 56) ~= 0 then return "field" end
      if u32(tvb, 52) ~= 0 then return "reserved" end
    elseif op == 0x06 then
      if u32(tvb, 56) ~= 0 or not u64zero(tvb, 48) then return "field" end
    end
  elseif cls == "ack" then
    if n ~= ACK_LEN + TRAILER then return "length" end
    if u32(tvb, 76) ~= 0 then return "reserved" end
    if band(u8(tvb, 40), 1) == 0 then return "field" end
  elseif cls == "nack" then
    if n ~= NACK_LEN + TRAILER then return "length" end
    if u8(tvb, 15) ~= 0 or u32(tvb, 36) ~= 0 then return "reserved" end
    local r = u8(tvb, 14)
    if r == 0 or r > 6 then return "field" end
  elseif cls == "conn" then
    local pl = u16(tvb, 82)
    -- CONNECT and ACCEPT: offset 80 counts 16-byte plane addresses (§7.9)
    local np = 0
    if op == 0x20 or op == 0x22 then np = u16(tvb, 80) end
    if n ~= CONN_LEN + pl + 16 * np + TRAILER then return "length" end
    if pl > MAX_PRIVATE or (pl ~= 0 and op ~= 0x20 and op ~= 0x22 and op ~= 0x23) then return "field" end
    if np > 7 then return "field" end
    if op == 0x20 or op == 0x22 then
      if op == 0x20 and u32(tvb, 4) ~= 0 then return "field" end
      if u32(tvb, 8) == 0 then return "field" end
      local w = u32(tvb, 20)
      if not is_pow2(w) or w > 65536 or not is_pow2(u16(tvb, 26)) then return "field" end
      if u16(tvb, 24) < 256 then return "field" end
    end
  end
  return nil
end

local function add_hidden(tree, field, range, value)
  local it = tree:add(field, range, value)
  it:set_hidden()
  return it
end

local function dissect_data(tvb, t, op, n, ncap)
  t:add(f.psn, tvb(8, 4))
  t:add(f.path_id, tvb(12, 2)); add_hidden(t, f.path, tvb(12, 2), u16(tvb, 12))
  t:add(f.stream, tvb(14, 2))
  t:add(f.path_seq, tvb(16, 4)); add_hidden(t, f.pathseq, tvb(16, 4), u32(tvb, 16))
  t:add(f.msg_id, tvb(20, 4))
  t:add(f.stream_seq, tvb(24, 4))
  t:add(f.offset, tvb(28, 4))
  t:add(f.msg_len, tvb(32, 4))
  t:add(f.payload_len, tvb(36, 2))
  t:add(f.reserved, tvb(38, 2))
  t:add(f.timestamp, tvb(40, 8))
  if op == 0x03 or op == 0x04 then
    t:add(f.recv_seq, tvb(48, 4))
    t:add(f.reserved, tvb(52, 4))
  else
    t:add(f.remote_addr, tvb(48, 8))
  end
  t:add(f.rkey, tvb(56, 4))
  t:add(f.imm, tvb(60, 4))
  -- Shown as far as the packet's own length allows: a PayloadLen that
  -- disagrees with it is flagged as a drop (length) instead.
  local pl = math.min(n - TRAILER, ncap) - DATA_LEN
  if pl > 0 then
    t:add(f.payload, tvb(DATA_LEN, pl))
  end
  return string.format(" psn=0x%08x path=%u seq=%u msg=%u off=%u len=%u",
    u32(tvb, 8), u16(tvb, 12), u32(tvb, 16), u32(tvb, 20), u32(tvb, 28), u16(tvb, 36))
end

local function dissect_ack(tvb, t)
  t:add(f.cum_psn, tvb(8, 4))
  t:add(f.path_id, tvb(12, 2)); add_hidden(t, f.path, tvb(12, 2), u16(tvb, 12))
  t:add(f.ce_count, tvb(14, 2))
  t:add(f.path_ack_seq, tvb(16, 4)); add_hidden(t, f.pathseq, tvb(16, 4), u32(tvb, 16))
  t:add(f.echo_psn, tvb(20, 4))
  t:add(f.echo_timestamp, tvb(24, 8))
  t:add(f.rate_hint, tvb(32, 4))
  t:add(f.credit, tvb(36, 4))
  local st = t:add(f.sack, tvb(40, 32))
  local arrived, missing, count = sack_ranges(tvb, 40, u32(tvb, 16))
  st:add(f.sack_count, tvb(40, 32), count):set_generated()
  for _, r in ipairs(arrived) do st:add(f.sack_arrived, tvb(40, 32), r):set_generated() end
  for _, r in ipairs(missing) do st:add(f.sack_missing, tvb(40, 32), r):set_generated() end
  t:add(f.ack_delay, tvb(72, 4))
  t:add(f.reserved, tvb(76, 4))
  local info = string.format(" cum=0x%08x path=%u ackseq=%u", u32(tvb, 8), u16(tvb, 12), u32(tvb, 16))
  if #missing > 0 then info = info .. " missing=" .. table.concat(missing, ",") end
  return info
end

local function dissect_nack(tvb, t, pinfo)
  t:add(f.psn, tvb(8, 4))
  t:add(f.path_id, tvb(12, 2)); add_hidden(t, f.path, tvb(12, 2), u16(tvb, 12))
  local r = t:add(f.nack_reason, tvb(14, 1))
  t:add(f.reserved, tvb(15, 1))
  t:add(f.path_seq, tvb(16, 4)); add_hidden(t, f.pathseq, tvb(16, 4), u32(tvb, 16))
  t:add(f.cum_psn, tvb(20, 4))
  t:add(f.echo_timestamp, tvb(24, 8))
  t:add(f.info, tvb(32, 4))
  t:add(f.reserved, tvb(36, 4))
  local name = nack_reasons[u8(tvb, 14)] or string.format("0x%02x", u8(tvb, 14))
  r:add_proto_expert_info(ex.nack, "NACK " .. name)
  return string.format(" %s psn=0x%08x path=%u seq=%u cum=0x%08x", name, u32(tvb, 8), u16(tvb, 12), u32(tvb, 16), u32(tvb, 20))
end

local function dissect_conn(tvb, t, op)
  t:add(f.src_conn, tvb(8, 4)); add_hidden(t, f.conn, tvb(8, 4), u32(tvb, 8))
  local ip = t:add(f.initial_psn, tvb(12, 4))
  if op == 0x24 then
    -- DISCONNECT: the same field carries what the closing end received (spec 7.7)
    ip:set_text(string.format("ReceivedPSN: 0x%08x", u32(tvb, 12)))
  end
  t:add(f.service, tvb(16, 4))
  t:add(f.recv_window, tvb(20, 4))
  t:add(f.max_payload, tvb(24, 2))
  t:add(f.msg_window, tvb(26, 2))
  local r = t:add(f.conn_reason, tvb(28, 2))
  t:add(f.paths, tvb(30, 2))
  t:add(f.timestamp, tvb(32, 8))
  t:add(f.cookie, tvb(40, 16))
  t:add(f.token, tvb(56, 8))
  t:add(f.reset_token, tvb(64, 16))
  local planes = op == 0x20 or op == 0x22
  if planes then t:add(f.plane_addrs, tvb(80, 2)) else t:add(f.app_reason, tvb(80, 2)) end
  t:add(f.private_len, tvb(82, 2))
  -- the private data and plane addresses as far as the packet holds them
  -- before the trailer
  local pend = math.min(CONN_LEN + u16(tvb, 82), tvb:len() - TRAILER)
  if pend > CONN_LEN then t:add(f.private, tvb(CONN_LEN, pend - CONN_LEN)) end
  if planes and u16(tvb, 80) > 0 then
    local aend = math.min(pend + 16 * u16(tvb, 80), tvb:len() - TRAILER)
    if aend > pend then t:add(f.planes, tvb(pend, aend - pend)) end
  end
  if op == 0x23 or op == 0x26 then
    r:add_proto_expert_info(ex.reset, opcodes[op] .. " " .. (conn_reasons[u16(tvb, 28)] or tostring(u16(tvb, 28))))
  end
  local s = string.format(" src=0x%08x", u32(tvb, 8))
  if op >= 0x23 then s = s .. " " .. (conn_reasons[u16(tvb, 28)] or tostring(u16(tvb, 28))) end
  return s
end

function p.dissector(tvb, pinfo, tree)
  -- n is the packet's length on the wire; a capture with a snap length
  -- may hold fewer bytes (ncap): the header is still shown if it is
  -- there, the CRC is not verified.
  local n, ncap = tvb:reported_len(), tvb:len()
  local truncated = ncap < n
  pinfo.cols.protocol = "MetaRoCE"
  local t = tree:add(p, tvb())
  local function dropped(reason, item)
    local d = t:add(f.drop, tvb(), reason)
    d:set_generated()
    d:add_proto_expert_info(ex.drop, "Dropped by a receiver: " .. reason .. " (docs/spec.md §3.5)")
    pinfo.cols.info:append(" [drop: " .. reason .. "]")
  end
  -- §3.5 step 1: 12 bytes reach the version check (prefix and trailer).
  if n < 12 then
    pinfo.cols.info = "MetaRoCE (short)"
    dropped("short")
    return ncap
  end
  if ncap < 8 then
    pinfo.cols.info = "MetaRoCE (truncated)"
    t:add_proto_expert_info(ex.trunc)
    return ncap
  end
  local ver, op, flags = u8(tvb, 0), u8(tvb, 1), u16(tvb, 2)
  t:add(f.version, tvb(0, 1))
  local name = opcodes[op] or string.format("OPCODE_%02x", op)
  t:add(f.opcode, tvb(1, 1))
  local ft = t:add(f.flags, tvb(2, 2))
  ft:add(f.ack_req, tvb(2, 2))
  ft:add(f.retx_flag, tvb(2, 2))
  ft:add(f.void, tvb(2, 2))
  ft:add(f.flags_rsvd, tvb(2, 2))
  local retx = band(flags, 2) ~= 0
  -- Present only on retransmissions, so that `metaroce.retx` filters
  -- them (as tcp.analysis.retransmission does).
  if retx then add_hidden(t, f.retx, tvb(2, 2), true) end
  t:add(f.dst_conn, tvb(4, 4)); add_hidden(t, f.conn, tvb(4, 4), u32(tvb, 4))

  local fl = {}
  if band(flags, 1) ~= 0 then fl[#fl + 1] = "ACK_REQ" end
  if retx then fl[#fl + 1] = "RETX" end
  if band(flags, 4) ~= 0 then fl[#fl + 1] = "VOID" end
  local cls, fixed = class_of(op)
  pinfo.cols.info = name .. string.format(" conn=0x%08x", u32(tvb, 4))
  local info = ""
  local reason = nil
  if ver ~= VERSION then
    reason = "version"
  elseif not cls then
    reason = "opcode"
  elseif n < fixed + TRAILER then
    reason = "short"
  end
  if not reason and ncap >= fixed then
    if cls == "data" then info = dissect_data(tvb, t, op, n, ncap)
    elseif cls == "ack" then info = dissect_ack(tvb, t)
    elseif cls == "nack" then info = dissect_nack(tvb, t, pinfo)
    else info = dissect_conn(tvb, t, op) end
  end
  -- The trailer: the last four bytes, in every version (§3.1).
  local crc_ok = true
  if truncated then
    t:add(f.crc_status, tvb(), 2):set_generated()
    t:add_proto_expert_info(ex.trunc)
  elseif not p.prefs.check_crc then
    t:add(f.crc, tvb(n - 4, 4))
    t:add(f.crc_status, tvb(n - 4, 4), 2):set_generated()
  else
    local got = u32(tvb, n - 4)
    local want = crc32c(tvb, 0, n - 4)
    crc_ok = want == got
    t:add(f.crc, tvb(n - 4, 4))
    local cs = t:add(f.crc_status, tvb(n - 4, 4), crc_ok and 1 or 0)
    cs:set_generated()
    if not crc_ok then
      t:add(f.crc_computed, tvb(n - 4, 4), want):set_generated()
      cs:add_proto_expert_info(ex.crc, string.format("Bad CRC32C 0x%08x, computed 0x%08x", got, want))
    end
  end
  if not reason then
    if not crc_ok then
      reason = "crc"
    elseif band(flags, 0xfff8) ~= 0 or (cls ~= "data" and band(flags, 4) ~= 0) then
      reason = "reserved"
    elseif ncap >= fixed then
      reason = validate(tvb, cls, op, flags, n)
    end
  end
  pinfo.cols.info:append(info)
  if #fl > 0 then pinfo.cols.info:append(" [" .. table.concat(fl, ",") .. "]") end
  if retx then ft:add_proto_expert_info(ex.retx) end
  if reason then dropped(reason) end
  return ncap
end

local udp_port = DissectorTable.get("udp.port")
udp_port:add(DEFAULT_PORT, p)
local current_port = DEFAULT_PORT

function p.prefs_changed()
  if p.prefs.port ~= current_port then
    if current_port ~= DEFAULT_PORT then udp_port:remove(current_port, p) end
    current_port = p.prefs.port
    if current_port ~= 0 then udp_port:add(current_port, p) end
  end
end
