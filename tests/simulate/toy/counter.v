// Hand-written test design for the simulation plumbing only (not an accelerator):
// on `start`, count `n` clock cycles, then pulse `done` and show `wdata + n` on `rdata`.
// With `n` = 0 it never finishes (to test timeouts).
module counter (
    input  wire         clk,
    input  wire         rst,
    input  wire         start,
    input  wire [31:0]  n,
    input  wire [127:0] wdata,
    output reg  [127:0] rdata,
    output reg          done,
    output reg          busy,
    output reg  [31:0]  cycles
);
    reg [31:0] left;
    reg [7:0] hidden;
    always @(posedge clk) begin
        hidden <= hidden + 8'd1;
        if (rst) begin
            left <= 0; done <= 0; busy <= 0; cycles <= 0; rdata <= 0; hidden <= 0;
        end else begin
            done <= 0;
            if (start && !busy) begin
                busy <= 1; left <= n; cycles <= 0; rdata <= wdata;
            end else if (busy) begin
                cycles <= cycles + 1;
                rdata <= rdata + 1;
                if (left == 1) begin busy <= 0; done <= 1; end
                left <= left - 1;
            end
        end
    end
endmodule
