# Block design and bitstream of the ceaz PYNQ overlay (body of build.tcl).
#
# bitstreams/vivado.py writes build.tcl as a header of `set` lines (board, part, widths,
# addresses, paths) followed by this file, so the design below holds no board-specific number.
# The design: Zynq PS -> SmartConnect -> {axi_dma_0 S_AXI_LITE, ceaz_0 s_axil};
# axi_dma_0 M_AXIS_MM2S -> ceaz_0 s_axis -> ceaz_0 m_axis -> axi_dma_0 S_AXIS_S2MM;
# axi_dma_0 M_AXI_{MM2S,S2MM} -> SmartConnect -> PS high-performance port; one clock (100 MHz).
# Instance names axi_dma_0 and ceaz_0 are the ones the PYNQ driver (sw/ceaz/driver.py) uses.

set here [file dirname [file normalize [info script]]]
set proj_dir [file join $here project]
set overlay_dir [file join $here overlay]

# The newest version of a Xilinx IP in this Vivado's catalog: versions differ between releases.
proc ceaz_ip_vlnv {name} {
    set defs [lsort -dictionary [get_ipdefs -all "xilinx.com:ip:${name}:*"]]
    if {[llength $defs] == 0} {
        error "IP xilinx.com:ip:${name} is not in this Vivado's catalog"
    }
    return [lindex $defs end]
}

create_project -force $design_name $proj_dir -part $part

# Board files give the PS its DDR and MIO preset; without them the PS keeps the part defaults.
set board_parts [lsort -dictionary [get_board_parts -quiet -latest_file_version $board_pattern]]
if {[llength $board_parts] > 0} {
    set board_part [lindex $board_parts end]
    set_property board_part $board_part [current_project]
    if {$board_connections ne ""} {
        set_property board_connections $board_connections [current_project]
    }
} else {
    set board_part ""
    puts "WARNING: no board files match $board_pattern: the PS keeps the defaults of $part\
          (install the board files for a bootable DDR/MIO configuration)"
}

set_property ip_repo_paths [list $ip_repo] [current_project]
update_ip_catalog -rebuild

create_bd_design $bd_name

# -- processing system ------------------------------------------------------------------------
if {$ps_kind eq "ps7"} {
    set ps [create_bd_cell -type ip -vlnv [ceaz_ip_vlnv processing_system7] processing_system7_0]
    if {$board_part ne ""} {
        apply_bd_automation -rule xilinx.com:bd_rule:processing_system7 \
            -config {make_external "FIXED_IO, DDR" apply_board_preset "1" Master "Disable" Slave "Disable"} $ps
    } else {
        apply_bd_automation -rule xilinx.com:bd_rule:processing_system7 \
            -config {make_external "FIXED_IO, DDR" apply_board_preset "0" Master "Disable" Slave "Disable"} $ps
    }
    set_property -dict [list \
        CONFIG.PCW_USE_M_AXI_GP0 {1} \
        CONFIG.PCW_USE_S_AXI_HP0 {1} \
        CONFIG.PCW_S_AXI_HP0_DATA_WIDTH {64} \
        CONFIG.PCW_USE_FABRIC_INTERRUPT {1} \
        CONFIG.PCW_IRQ_F2P_INTR {1} \
        CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ $clock_mhz \
    ] $ps
    set ps_clk processing_system7_0/FCLK_CLK0
    set ps_resetn processing_system7_0/FCLK_RESET0_N
    set ps_clock_pins {processing_system7_0/M_AXI_GP0_ACLK processing_system7_0/S_AXI_HP0_ACLK}
    set ps_irq processing_system7_0/IRQ_F2P
    set ps_master processing_system7_0/M_AXI_GP0
    set ps_slave processing_system7_0/S_AXI_HP0
    set ps_data_space processing_system7_0/Data
} else {
    set ps [create_bd_cell -type ip -vlnv [ceaz_ip_vlnv zynq_ultra_ps_e] zynq_ultra_ps_e_0]
    if {$board_part ne ""} {
        apply_bd_automation -rule xilinx.com:bd_rule:zynq_ultra_ps_e \
            -config {apply_board_preset "1"} $ps
    }
    set_property -dict [list \
        CONFIG.PSU__USE__M_AXI_GP0 {1} \
        CONFIG.PSU__USE__M_AXI_GP1 {0} \
        CONFIG.PSU__USE__M_AXI_GP2 {0} \
        CONFIG.PSU__USE__S_AXI_GP2 {1} \
        CONFIG.PSU__SAXIGP2__DATA_WIDTH {128} \
        CONFIG.PSU__USE__IRQ0 {1} \
        CONFIG.PSU__FPGA_PL0_ENABLE {1} \
        CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ $clock_mhz \
    ] $ps
    set ps_clk zynq_ultra_ps_e_0/pl_clk0
    set ps_resetn zynq_ultra_ps_e_0/pl_resetn0
    set ps_clock_pins {zynq_ultra_ps_e_0/maxihpm0_fpd_aclk zynq_ultra_ps_e_0/saxihp0_fpd_aclk}
    set ps_irq zynq_ultra_ps_e_0/pl_ps_irq0
    set ps_master zynq_ultra_ps_e_0/M_AXI_HPM0_FPD
    set ps_slave zynq_ultra_ps_e_0/S_AXI_HP0_FPD
    set ps_data_space zynq_ultra_ps_e_0/Data
}

# -- the DMA, the compressor and the interconnect -----------------------------------------------
set dma [create_bd_cell -type ip -vlnv [ceaz_ip_vlnv axi_dma] axi_dma_0]
# Simple mode (no scatter-gather), both channels, memory side as wide as the stream side.
set_property -dict [list \
    CONFIG.c_include_sg {0} \
    CONFIG.c_include_mm2s {1} \
    CONFIG.c_include_s2mm {1} \
    CONFIG.c_sg_length_width $dma_length_bits \
    CONFIG.c_addr_width $dma_addr_bits \
    CONFIG.c_m_axis_mm2s_tdata_width $mm2s_bits \
    CONFIG.c_m_axi_mm2s_data_width $mm2s_bits \
    CONFIG.c_s_axis_s2mm_tdata_width $s2mm_bits \
    CONFIG.c_m_axi_s2mm_data_width $s2mm_bits \
    CONFIG.c_mm2s_burst_size {16} \
    CONFIG.c_s2mm_burst_size {16} \
] $dma

create_bd_cell -type ip -vlnv $ceaz_vlnv ceaz_0

set ctrl [create_bd_cell -type ip -vlnv [ceaz_ip_vlnv smartconnect] axi_smc_ctrl]
set_property -dict [list CONFIG.NUM_SI {1} CONFIG.NUM_MI {2}] $ctrl
set data [create_bd_cell -type ip -vlnv [ceaz_ip_vlnv smartconnect] axi_smc_data]
set_property -dict [list CONFIG.NUM_SI {2} CONFIG.NUM_MI {1}] $data

set rst [create_bd_cell -type ip -vlnv [ceaz_ip_vlnv proc_sys_reset] rst_ps_0]
set irqs [create_bd_cell -type ip -vlnv [ceaz_ip_vlnv xlconcat] irq_concat]
set_property -dict [list CONFIG.NUM_PORTS {3}] $irqs

# Control: PS master -> DMA registers and compressor registers.
connect_bd_intf_net [get_bd_intf_pins $ps_master] [get_bd_intf_pins axi_smc_ctrl/S00_AXI]
connect_bd_intf_net [get_bd_intf_pins axi_smc_ctrl/M00_AXI] [get_bd_intf_pins axi_dma_0/S_AXI_LITE]
connect_bd_intf_net [get_bd_intf_pins axi_smc_ctrl/M01_AXI] [get_bd_intf_pins ceaz_0/s_axil]
# Data: DMA -> compressor -> DMA, and the DMA's memory masters -> PS DDR port.
connect_bd_intf_net [get_bd_intf_pins axi_dma_0/M_AXIS_MM2S] [get_bd_intf_pins ceaz_0/s_axis]
connect_bd_intf_net [get_bd_intf_pins ceaz_0/m_axis] [get_bd_intf_pins axi_dma_0/S_AXIS_S2MM]
connect_bd_intf_net [get_bd_intf_pins axi_dma_0/M_AXI_MM2S] [get_bd_intf_pins axi_smc_data/S00_AXI]
connect_bd_intf_net [get_bd_intf_pins axi_dma_0/M_AXI_S2MM] [get_bd_intf_pins axi_smc_data/S01_AXI]
connect_bd_intf_net [get_bd_intf_pins axi_smc_data/M00_AXI] [get_bd_intf_pins $ps_slave]

# One clock and its synchronous reset for everything.
connect_bd_net [get_bd_pins $ps_clk] \
    [get_bd_pins $ps_clock_pins] \
    [get_bd_pins rst_ps_0/slowest_sync_clk] \
    [get_bd_pins axi_smc_ctrl/aclk] [get_bd_pins axi_smc_data/aclk] \
    [get_bd_pins axi_dma_0/s_axi_lite_aclk] [get_bd_pins axi_dma_0/m_axi_mm2s_aclk] \
    [get_bd_pins axi_dma_0/m_axi_s2mm_aclk] [get_bd_pins ceaz_0/aclk]
connect_bd_net [get_bd_pins $ps_resetn] [get_bd_pins rst_ps_0/ext_reset_in]
connect_bd_net [get_bd_pins rst_ps_0/peripheral_aresetn] \
    [get_bd_pins axi_smc_ctrl/aresetn] [get_bd_pins axi_smc_data/aresetn] \
    [get_bd_pins axi_dma_0/axi_resetn] [get_bd_pins ceaz_0/aresetn]

# Interrupts: compressor, DMA MM2S, DMA S2MM -> PS fabric interrupt input.
connect_bd_net [get_bd_pins ceaz_0/irq] [get_bd_pins irq_concat/In0]
connect_bd_net [get_bd_pins axi_dma_0/mm2s_introut] [get_bd_pins irq_concat/In1]
connect_bd_net [get_bd_pins axi_dma_0/s2mm_introut] [get_bd_pins irq_concat/In2]
connect_bd_net [get_bd_pins irq_concat/dout] [get_bd_pins $ps_irq]

# -- addresses ---------------------------------------------------------------------------------
assign_bd_address -offset $dma_base -range $dma_range \
    -target_address_space [get_bd_addr_spaces $ps_data_space] \
    [get_bd_addr_segs axi_dma_0/S_AXI_LITE/Reg] -force
assign_bd_address -offset $ceaz_base -range $ceaz_range \
    -target_address_space [get_bd_addr_spaces $ps_data_space] \
    [get_bd_addr_segs ceaz_0/s_axil/reg0] -force
# The DMA's memory masters see the PS DDR wherever Vivado puts it.
assign_bd_address

validate_bd_design
save_bd_design

# -- synthesis, implementation, bitstream ------------------------------------------------------
set bd_file [get_files $bd_name.bd]
generate_target all $bd_file
set wrapper [make_wrapper -files $bd_file -top]
add_files -norecurse $wrapper
set_property top ${bd_name}_wrapper [current_fileset]
update_compile_order -fileset sources_1

set jobs 4
if {[info exists ::env(CEAZ_VIVADO_JOBS)]} {
    set jobs $::env(CEAZ_VIVADO_JOBS)
}
launch_runs impl_1 -to_step write_bitstream -jobs $jobs
wait_on_run impl_1
set status [get_property STATUS [get_runs impl_1]]
if {![string match "*write_bitstream Complete*" $status]} {
    error "implementation did not finish: $status (see $proj_dir/$design_name.runs/impl_1)"
}

# -- the PYNQ overlay: <name>.bit next to <name>.hwh -------------------------------------------
set bit_file [lindex [glob -nocomplain [file join $proj_dir $design_name.runs impl_1 *.bit]] 0]
# Vivado 2020.2 and later keep the handoff under .gen, older releases under .srcs.
set hwh_file [lindex [glob -nocomplain \
    [file join $proj_dir * sources_1 bd $bd_name hw_handoff $bd_name.hwh]] 0]
if {$bit_file eq "" || $hwh_file eq ""} {
    error "bitstream or hardware handoff missing under $proj_dir"
}
file mkdir $overlay_dir
file copy -force $bit_file [file join $overlay_dir $overlay_name.bit]
file copy -force $hwh_file [file join $overlay_dir $overlay_name.hwh]
puts "ceaz overlay: [file join $overlay_dir $overlay_name].{bit,hwh}"
