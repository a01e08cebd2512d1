// Yosys's $alu onto ECP5 CCU2C carry chains that take their carry-in and give their carry-out
// themselves, instead of through the extra carry cells nextpnr adds (bitstreams/flow.py runs
// this map in place of synth_ecp5's own; bitstreams/README.md, "Carry chains").
//
// An ECP5 chain cannot start from a constant or a routed carry-in, nor end in routing: nextpnr
// puts a whole CCU2C before every chain whose CIN is connected (a constant 0 or 1 included,
// and Yosys connects one to every chain) and after every chain whose carry-out has a net, two
// logic cells each. Here the chain's first half-cell makes the carry-in (its LUT4 is 0, so the
// carry it passes on is its LUT2, which is A = CI, whatever arrives on its CIN: the same head
// nextpnr would add), and the carry-out CO[Y_WIDTH - 1] is the sum of a half-cell
// above the last bit whose LUT4 is 0 (S = the carry into it). Each takes half a CCU2C, often
// the otherwise idle half of the first or last one. A tail that needs a CCU2C of its own is a
// cell of its own, removed with the other unused logic when nothing reads CO[Y_WIDTH - 1].
//
// Every port of every CCU2C is connected, if only to a wire nothing reads: with the tail's
// unused outputs left out, ABC9 (Yosys 0.70) dropped logic that was in use, and not the same
// in every run (the codebook builder lost 6 of its 15 block RAMs in some runs).
//
// Positions: 0 is the head, 1 + i is bit i. The cells compute what synth_ecp5's map does
// (tests/test_ccu2c_alu.py proves each width equivalent to Yosys's $alu, the head's CIN free).

(* techmap_celltype = "$alu" *)
module _80_ceaz_ccu2c_alu (A, B, CI, BI, X, Y, CO);
	parameter A_SIGNED = 0;
	parameter B_SIGNED = 0;
	parameter A_WIDTH = 1;
	parameter B_WIDTH = 1;
	parameter Y_WIDTH = 1;

	(* force_downto *)
	input [A_WIDTH-1:0] A;
	(* force_downto *)
	input [B_WIDTH-1:0] B;
	(* force_downto *)
	output [Y_WIDTH-1:0] X, Y;

	input CI, BI;
	(* force_downto *)
	output [Y_WIDTH-1:0] CO;

	// Small ones stay LUTs, as in synth_ecp5's map.
	wire _TECHMAP_FAIL_ = Y_WIDTH <= 4;

	(* force_downto *)
	wire [Y_WIDTH-1:0] A_buf, B_buf;
	\$pos #(.A_SIGNED(A_SIGNED), .A_WIDTH(A_WIDTH), .Y_WIDTH(Y_WIDTH)) A_conv (.A(A), .Y(A_buf));
	\$pos #(.A_SIGNED(B_SIGNED), .A_WIDTH(B_WIDTH), .Y_WIDTH(Y_WIDTH)) B_conv (.A(B), .Y(B_buf));

	// Head and bits, rounded up to whole CCU2Cs; a spare top half, if any, is the tail.
	localparam P = Y_WIDTH + 1;
	localparam P2 = ((P + 1) / 2) * 2;
	localparam TAIL_INSIDE = P2 > P;

	// Bit i's LUT4 (D = 1): A ^ B ^ BI, the propagate; its LUT2 (A, B): A, the generate.
	localparam [15:0] BIT = 16'b1001011010101010;
	// Head: LUT4 0, LUT2 = A = CI. Tail: LUT4 0, so S = the carry in.
	localparam [15:0] HEAD = 16'h000A;
	localparam [15:0] TAIL = 16'h0000;

	(* force_downto *)
	wire [P2-1:0] PA = {{(P2 - P){1'b0}}, A_buf, CI};
	(* force_downto *)
	wire [P2-1:0] PB = {{(P2 - P){1'b0}}, B_buf, 1'b0};
	(* force_downto *)
	wire [P2-1:0] PS;
	(* force_downto *)
	wire [P2/2-1:0] FCO;

	genvar j;
	generate for (j = 0; j < P2; j = j + 2) begin:slice
		if (j == 0) begin
			// The head. Nothing it passes on depends on its CIN, tied to 0 here and untied for
			// nextpnr by bitstreams/carry.py.
			CCU2C #(
				.INIT0(HEAD),
				.INIT1(1 < P ? BIT : TAIL),
				.INJECT1_0("NO"),
				.INJECT1_1("NO")
			) ccu2c_i (
				.CIN(1'b0),
				.A0(PA[0]), .B0(PB[0]), .C0(BI), .D0(1'b1),
				.A1(PA[1]), .B1(PB[1]), .C1(BI), .D1(1'b1),
				.S0(PS[0]), .S1(PS[1]),
				.COUT(FCO[0])
			);
		end else begin
			CCU2C #(
				.INIT0(BIT),
				.INIT1(j + 1 < P ? BIT : TAIL),
				.INJECT1_0("NO"),
				.INJECT1_1("NO")
			) ccu2c_i (
				.CIN(FCO[j/2 - 1]),
				.A0(PA[j]), .B0(PB[j]), .C0(BI), .D0(1'b1),
				.A1(PA[j+1]), .B1(PB[j+1]), .C1(BI), .D1(1'b1),
				.S0(PS[j]), .S1(PS[j+1]),
				.COUT(FCO[j/2])
			);
		end
	end endgenerate

	(* force_downto *)
	wire [Y_WIDTH-1:0] AA = A_buf;
	(* force_downto *)
	wire [Y_WIDTH-1:0] BB = BI ? ~B_buf : B_buf;
	(* force_downto *)
	wire [Y_WIDTH:0] C;  // C[i]: the carry into bit i
	assign C[0] = CI;

	genvar i;
	generate for (i = 0; i < Y_WIDTH; i = i + 1) begin:bit
		assign Y[i] = PS[i + 1];
		if (i == Y_WIDTH - 1) begin
			// The carry out of the top bit: the tail's sum.
			wire tail_s, tail_s1, tail_cout;
			if (TAIL_INSIDE) begin
				assign tail_s = PS[P];
			end else begin
				CCU2C #(
					.INIT0(TAIL),
					.INIT1(TAIL),
					.INJECT1_0("NO"),
					.INJECT1_1("NO")
				) tail_i (
					.CIN(FCO[P2/2 - 1]),
					.A0(1'b0), .B0(1'b0), .C0(1'b0), .D0(1'b1),
					.A1(1'b0), .B1(1'b0), .C1(1'b0), .D1(1'b1),
					.S0(tail_s), .S1(tail_s1), .COUT(tail_cout)
				);
			end
			assign CO[i] = tail_s;
		end else if (i % 2 == 0) begin
			// Bit i is the upper half of its CCU2C: its carry-out is the cell's.
			assign CO[i] = FCO[i/2];
		end else begin
			// The lower half: its carry-out stays inside the cell; form it from the carry in.
			assign CO[i] = (AA[i] && BB[i]) || (C[i] && (AA[i] || BB[i]));
		end
		assign C[i + 1] = CO[i];
	end endgenerate

	assign X = AA ^ BB;
endmodule
